"""Cheap filters for an existing bitext (``babelspace score``): duplicates and identical sides by default, the others when their flag is given.

Each filter looks at one row (source, target, and the languages of both sides) and says whether it
flags it; :func:`apply_filters` runs the enabled ones over every row and counts, per filter, the rows
it flags (a row may be flagged by several; it is dropped for the first, in :data:`FILTER_ORDER`).

- ``duplicates``: the same (source, target) as an earlier row once each side is casefolded and
  reduced to its letters and digits (:func:`text_key`: a repeat that differs in case, spacing or
  punctuation is a near-duplicate);
- ``identical``: both sides the same, or nearly (casefolded letters and digits equal, or a
  :class:`difflib.SequenceMatcher` ratio of at least :data:`NEAR_IDENTICAL`): an untranslated copy;
  only where a side has at least :data:`IDENTICAL_MIN_CHARS` characters (a shorter string that is
  the same in both languages is as often a right translation: a name, a number, a code);
- ``length_ratio``: the longer side has more than R times the characters of the shorter;
- ``script``: fewer than half of a side's letters are in the scripts of its language
  (:data:`LANGUAGE_SCRIPTS`; for a language not listed, the script most of that side's rows use),
  read from the Unicode character names (``unicodedata``);
- ``lang``: an offline language identifier (``py3langid``, the langid.py model shipped in its pip
  package, 97 languages; ``pip install 'babelspace[lid]'``) ranks the side's language below the
  top :data:`LID_TOP` for a side of at least :data:`LID_MIN_CHARS` characters (shorter text is too
  little evidence and is not flagged).
"""

from __future__ import annotations

import difflib
import unicodedata
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

from babelspace.errors import BabelspaceError

__all__ = ["FILTER_ORDER", "FilterOptions", "FilterReport", "apply_filters", "dominant_script", "text_key"]

#: The order in which a row's drop reason is chosen.
FILTER_ORDER = ("duplicates", "identical", "length_ratio", "script", "lang")
#: Near-identical: difflib ratio of the casefolded sides at least this.
NEAR_IDENTICAL = 0.9
#: ... flagged only where a side has at least this many characters (names are the same in many languages).
IDENTICAL_MIN_CHARS = 20
#: The language identifier flags a side whose language is not among its best ``LID_TOP`` guesses.
LID_TOP = 3
#: ... and only sides at least this long (characters).
LID_MIN_CHARS = 20

#: Scripts (first word of the Unicode character name, "CJK" for ideographs) of languages not written in
#: Latin script; every other language defaults to the script most of its side's rows use.
LANGUAGE_SCRIPTS: dict[str, frozenset[str]] = {
    "ar": frozenset({"ARABIC"}),
    "fa": frozenset({"ARABIC"}),
    "ur": frozenset({"ARABIC"}),
    "he": frozenset({"HEBREW"}),
    "el": frozenset({"GREEK"}),
    "ru": frozenset({"CYRILLIC"}),
    "uk": frozenset({"CYRILLIC"}),
    "bg": frozenset({"CYRILLIC"}),
    "hi": frozenset({"DEVANAGARI"}),
    "mr": frozenset({"DEVANAGARI"}),
    "ne": frozenset({"DEVANAGARI"}),
    "th": frozenset({"THAI"}),
    "ko": frozenset({"HANGUL", "CJK"}),
    "zh": frozenset({"CJK"}),
    "ja": frozenset({"CJK", "HIRAGANA", "KATAKANA"}),
}


@dataclass
class FilterOptions:
    """Which filters run: ``length_ratio`` is the largest allowed ratio (None: off). Duplicates and
    identical sides, what any cleaner drops, are on by default."""

    duplicates: bool = True
    identical: bool = True
    length_ratio: float | None = None
    script: bool = False
    lang: bool = False

    def enabled(self) -> list[str]:
        on = {
            "duplicates": self.duplicates,
            "identical": self.identical,
            "length_ratio": self.length_ratio is not None,
            "script": self.script,
            "lang": self.lang,
        }
        return [name for name in FILTER_ORDER if on[name]]


@dataclass
class FilterReport:
    """Per row the first filter that flags it (None: kept); per filter how many rows it flags."""

    reasons: list[str | None]
    flagged: dict[str, int] = field(default_factory=dict)
    dropped: dict[str, int] = field(default_factory=dict)


def _base(lang: str | None) -> str | None:
    """``de`` / ``deu`` / ``zho_Hans`` -> a two-letter code where one is known, else the code as given."""
    if lang is None:
        return None
    head = lang.split("_")[0].lower()
    return _THREE_TO_TWO.get(head, head)


_THREE_TO_TWO = {
    "eng": "en", "deu": "de", "fra": "fr", "spa": "es", "ita": "it", "por": "pt", "rus": "ru",
    "zho": "zh", "cmn": "zh", "jpn": "ja", "kor": "ko", "ara": "ar", "hin": "hi", "nld": "nl",
    "pol": "pl", "tur": "tr", "vie": "vi", "ukr": "uk", "ell": "el", "heb": "he", "tha": "th",
    "swe": "sv", "fin": "fi", "ces": "cs", "ron": "ro", "hun": "hu", "dan": "da", "nor": "no",
    "ind": "id", "fas": "fa", "urd": "ur", "bul": "bg", "mar": "mr", "nep": "ne",
}  # fmt: skip


@lru_cache(maxsize=65536)
def _char_script(ch: str) -> str | None:
    if not ch.isalpha():
        return None
    name = unicodedata.name(ch, "")
    return name.split(" ", 1)[0] if name else None


def script_counts(text: str) -> Counter:
    """Letters of ``text`` per script."""
    return Counter(s for s in map(_char_script, text) if s is not None)


def dominant_script(text: str) -> str | None:
    """The script most of the letters of ``text`` are in (None without letters)."""
    counts = script_counts(text)
    return counts.most_common(1)[0][0] if counts else None


def _wrong_script(text: str, scripts: frozenset[str]) -> bool:
    counts = script_counts(text)
    total = sum(counts.values())
    return total > 0 and sum(counts[s] for s in scripts) < 0.5 * total


def _side_scripts(texts: Sequence[str], lang: str | None) -> frozenset[str]:
    base = _base(lang)
    if base in LANGUAGE_SCRIPTS:
        return LANGUAGE_SCRIPTS[base]
    votes = Counter(s for s in map(dominant_script, texts) if s is not None)
    return frozenset({votes.most_common(1)[0][0]}) if votes else frozenset({"LATIN"})


def text_key(text: str) -> str:
    """``text`` casefolded, letters and digits only (the text itself when it has none)."""
    return "".join(c for c in text.casefold() if c.isalnum()) or text


def _near_identical(a: str, b: str) -> bool:
    if text_key(a) == text_key(b):
        return True
    m = difflib.SequenceMatcher(None, a.casefold(), b.casefold(), autojunk=False)
    return (
        m.real_quick_ratio() >= NEAR_IDENTICAL
        and m.quick_ratio() >= NEAR_IDENTICAL
        and m.ratio() >= NEAR_IDENTICAL
    )


def _length_ratio(a: str, b: str) -> float:
    la, lb = len(a), len(b)
    return max(la, lb) / max(1, min(la, lb))


def _identifier() -> Callable[[str], list[str]]:
    """The best :data:`LID_TOP` languages of a text, by py3langid."""
    try:
        from py3langid.langid import rank
    except ImportError:
        raise BabelspaceError(
            "--filter-lang needs the offline language identifier py3langid: pip install 'babelspace[lid]'"
        ) from None

    def top(text: str) -> list[str]:
        return [lang for lang, _ in rank(text)[:LID_TOP]]

    return top


def apply_filters(
    src: Sequence[str],
    tgt: Sequence[str],
    src_langs: Sequence[str | None],
    tgt_langs: Sequence[str | None],
    options: FilterOptions,
) -> FilterReport:
    """Run the enabled filters over every row (see the module docstring)."""
    enabled = options.enabled()
    flags: dict[str, list[bool]] = {}
    if "duplicates" in enabled:
        seen: set[tuple[str, str]] = set()
        dup = []
        for a, b in zip(src, tgt, strict=True):
            key = (text_key(a), text_key(b))
            dup.append(key in seen)
            seen.add(key)
        flags["duplicates"] = dup
    if "identical" in enabled:
        flags["identical"] = [
            max(len(a), len(b)) >= IDENTICAL_MIN_CHARS and _near_identical(a, b)
            for a, b in zip(src, tgt, strict=True)
        ]
    if options.length_ratio is not None:
        r = options.length_ratio
        flags["length_ratio"] = [_length_ratio(a, b) > r for a, b in zip(src, tgt, strict=True)]
    if "script" in enabled:
        flags["script"] = _script_flags(src, src_langs) if src else []
        flags["script"] = [
            a or b for a, b in zip(flags["script"], _script_flags(tgt, tgt_langs), strict=True)
        ]
    if "lang" in enabled:
        flags["lang"] = _lang_flags(src, tgt, src_langs, tgt_langs)
    reasons = [next((n for n in enabled if flags[n][i]), None) for i in range(len(src))]
    flagged = {n: int(sum(flags[n])) for n in enabled}
    dropped = {n: reasons.count(n) for n in enabled}
    return FilterReport(reasons, flagged, dropped)


def _script_flags(texts: Sequence[str], langs: Sequence[str | None]) -> list[bool]:
    """Per row whether the side is in the wrong script; rows are grouped by their language."""
    out = [False] * len(texts)
    for lang in set(langs):
        rows = [i for i, x in enumerate(langs) if x == lang]
        scripts = _side_scripts([texts[i] for i in rows], lang)
        for i in rows:
            out[i] = _wrong_script(texts[i], scripts)
    return out


def _lang_flags(
    src: Sequence[str], tgt: Sequence[str], src_langs: Sequence[str | None], tgt_langs: Sequence[str | None]
) -> list[bool]:
    if any(x is None for x in [*src_langs, *tgt_langs]):
        raise BabelspaceError(
            "--filter-lang needs the language of both sides: pass --src-lang and --tgt-lang"
        )
    top = _identifier()

    def wrong(text: str, lang: str) -> bool:
        return len(text) >= LID_MIN_CHARS and _base(lang) not in top(text)

    from babelspace.progress import Progress

    out = []
    with Progress(total=len(src), desc="language filter", unit="row", disable=len(src) < 10_000) as bar:
        for a, b, sl, tl in zip(src, tgt, src_langs, tgt_langs, strict=True):
            out.append(wrong(a, sl) or wrong(b, tl))
            bar.update(1)
    return out
