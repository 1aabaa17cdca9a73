"""STS files: STS 2017 (``STS.en-de.txt``-style, score last or first) and the STS benchmark (TSV/CSV),
with the language pair taken from the file name when not given. Scoring is :mod:`babelspace.metrics.sts`."""

from __future__ import annotations

import csv
import logging
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from babelspace.data.lines import strict_lines
from babelspace.errors import CorpusFormatError

logger = logging.getLogger(__name__)


_PAIR_IN_NAME = re.compile(r"(?:^|[._])([a-z]{2,3})-([a-z]{2,3})\.(?:txt|tsv|csv)$", re.IGNORECASE)


@dataclass
class StsData:
    """Sentence pairs with gold similarity scores and the language of each side."""

    s1: list[str]
    s2: list[str]
    scores: np.ndarray
    lang1: str
    lang2: str
    name: str = ""

    def __len__(self) -> int:
        return len(self.s1)


def langs_from_filename(path: str | Path) -> tuple[str, str] | None:
    """``STS.en-de.txt`` / ``en-de.tsv`` -> ``("en", "de")``; None when the name carries no pair."""
    m = _PAIR_IN_NAME.search(Path(path).name)
    return (m.group(1).lower(), m.group(2).lower()) if m else None


def _parse_score(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if np.isfinite(value) else None


def read_sts17(path: str | Path, langs: tuple[str, str] | str | None = None) -> StsData:
    """Read an STS17-style file: lines ``score<TAB>sentence1<TAB>sentence2``.

    ``langs`` gives the language of each side (``("en", "de")`` or ``"en-de"``); by default it is taken
    from the file name (``STS.en-de.txt``, ``en-de.tsv``). A first line whose score field is not a number
    is taken as a header; blank lines are skipped. Malformed lines raise :class:`CorpusFormatError`.
    """
    path = Path(path)
    if isinstance(langs, str):
        parts = langs.split("-")
        if len(parts) != 2 or not all(parts):
            raise ValueError(f"langs must look like 'en-de', got {langs!r}")
        pair: tuple[str, str] | None = (parts[0], parts[1])
    else:
        pair = langs if langs is not None else langs_from_filename(path)
    if pair is None:
        raise CorpusFormatError(
            path,
            None,
            "cannot tell the languages",
            hint="name the file like STS.en-de.txt or pass langs=('en', 'de')",
        )
    s1: list[str] = []
    s2: list[str] = []
    scores: list[float] = []
    for lineno, line in strict_lines(path):
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) != 3:
            raise CorpusFormatError(
                path, lineno, f"expected 3 tab-separated fields (score, s1, s2), got {len(fields)}"
            )
        score = _parse_score(fields[0])
        if score is None:
            if lineno == 1 and not s1:
                continue  # header
            raise CorpusFormatError(path, lineno, f"score {fields[0]!r} is not a number")
        if not fields[1].strip() or not fields[2].strip():
            raise CorpusFormatError(path, lineno, "empty sentence")
        s1.append(fields[1])
        s2.append(fields[2])
        scores.append(score)
    if not s1:
        raise CorpusFormatError(path, None, "no sentence pairs found")
    return StsData(s1, s2, np.asarray(scores, dtype=np.float64), pair[0], pair[1], name=path.name)


def read_stsb(path: str | Path, *, delimiter: str | None = None, lang: str = "en") -> StsData:
    """Read an STS-benchmark file: ``genre, file, year, id, score, sentence1, sentence2`` per line.

    Tab-separated (the original ``sts-*.csv`` files, whose extra trailing fields are ignored) or
    comma-separated with CSV quoting; ``delimiter=None`` picks tab when the first line has one.
    A header line (non-numeric score) is skipped. Malformed lines raise :class:`CorpusFormatError`.
    """
    path = Path(path)
    lines = [line for _, line in strict_lines(path)]
    if delimiter is None:
        first = next((ln for ln in lines if ln.strip()), "")
        delimiter = "\t" if "\t" in first else ","
    s1: list[str] = []
    s2: list[str] = []
    scores: list[float] = []
    if delimiter == "\t":
        rows = ((i, ln.split("\t")) for i, ln in enumerate(lines, start=1))
    else:
        rows = ((i, row) for i, row in enumerate(csv.reader(lines, delimiter=delimiter), start=1))
    for lineno, fields in rows:
        if not fields or all(not x.strip() for x in fields):
            continue
        if len(fields) < 7:
            raise CorpusFormatError(
                path, lineno, f"expected 7 fields (genre, file, year, id, score, s1, s2), got {len(fields)}"
            )
        score = _parse_score(fields[4])
        if score is None:
            if not s1 and lineno == 1:
                continue  # header
            raise CorpusFormatError(path, lineno, f"score {fields[4]!r} is not a number")
        if not fields[5].strip() or not fields[6].strip():
            raise CorpusFormatError(path, lineno, "empty sentence")
        s1.append(fields[5])
        s2.append(fields[6])
        scores.append(score)
    if not s1:
        raise CorpusFormatError(path, None, "no sentence pairs found")
    return StsData(s1, s2, np.asarray(scores, dtype=np.float64), lang, lang, name=path.name)
