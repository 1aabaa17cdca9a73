"""CLDR display names and calendar terms (source ``cldr``) from the installed ``babel`` package: short
parallel text for the Bible's 21 non-English languages; whole categories held out for test."""

from __future__ import annotations

import functools
import importlib.util
import logging
from collections.abc import Iterable
from pathlib import Path

from babelspace.data.pairs import ParallelCorpus, ParallelPair, ReadReport, normalize_whitespace
from babelspace.data.sources.splits import check_split, split_of_text
from babelspace.errors import ResourceError

logger = logging.getLogger(__name__)

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


def babel_dir() -> Path:
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
    check_split(split)
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
