"""The rows every corpus reader yields, whatever the format: ``(src, tgt, language-pair id, line)``.

One set of per-row rules for every format (TSV, line-aligned files, datasets, JSON/CSV/Parquet),
shared by training (the Arrow cache, `babelspace.data.arrow_corpus`) and evaluation
(`babelspace.data.readers`, which turns the rows into `ParallelPair` objects): texts are
whitespace-normalised, an empty side is the bad row ``"empty side"``, a language column that holds no
language code is ``"unknown language code"``. Language pairs are numbered in order of first
appearance (`LangPairIds`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from babelspace.data.languages import is_valid_lang, validate_lang
from babelspace.data.lines import BadLines
from babelspace.data.pairs import ParallelPair

__all__ = ["Chunk", "LangPairIds", "Row", "batched", "check_row", "pairs_of", "to_chunk"]

#: One good row: source, target, language-pair id, line (or row) number.
Row = tuple[str, str, int, int]
#: Rows as arrays: sources, targets, language-pair ids, line numbers.
Chunk = tuple[pa.Array, pa.Array, np.ndarray, np.ndarray]


class LangPairIds:
    """Language pair ids, in order of first appearance; row language codes checked once per code pair."""

    def __init__(self) -> None:
        self.ids: dict[tuple[str, str], int] = {}
        self._codes: dict[tuple[Any, Any], int | str] = {}

    def of(self, sl: str, tl: str) -> int:
        return self.ids.setdefault((sl, tl), len(self.ids))

    def of_codes(self, codes: tuple[Any, Any]) -> int | str:
        """The id of a row's language codes, or the repr of the first code that is not a language."""
        found = self._codes.get(codes)
        if found is None:
            unknown = [c for c in codes if not isinstance(c, str) or not is_valid_lang(c.strip())]
            if unknown:
                found = repr(unknown[0].strip() if isinstance(unknown[0], str) else unknown[0])
            else:
                found = self.of(*(validate_lang(c.strip()) for c in codes))
            self._codes[codes] = found
        return found

    def default(self, src_lang: str | None, tgt_lang: str | None) -> int | None:
        """The id of the languages given as options (source ``en`` when unset); None without a target."""
        sl = validate_lang(src_lang or "en")
        return None if tgt_lang is None else self.of(sl, validate_lang(tgt_lang))


def check_row(
    path: Path | str,
    line_no: int,
    cols: Sequence[Any],
    default: int | None,
    bad: BadLines,
    langs: LangPairIds,
) -> Row | None:
    """The row ``(src, tgt, lang_pair_id, line_no)`` of fields ``src, tgt[, src_lang, tgt_lang]`` (two
    fields: the languages are ``default``); None after reporting it to ``bad`` when it is not good."""
    src, tgt = " ".join(cols[0].split()), " ".join(cols[1].split())
    if not src or not tgt:
        bad(path, line_no, "empty side", "(source)" if not src else "(target)")
        return None
    lp = default if len(cols) == 2 else langs.of_codes((cols[2], cols[3]))
    if isinstance(lp, str):
        bad(path, line_no, "unknown language code", lp)
        return None
    return src, tgt, lp, line_no  # type: ignore[return-value]  # default is set for two fields


def to_chunk(rows: Sequence[Row]) -> Chunk:
    """Rows as one chunk of arrays."""
    src, tgt, lp, line = zip(*rows, strict=True) if rows else ((), (), (), ())
    return (
        pa.array(src, pa.string()),
        pa.array(tgt, pa.string()),
        np.asarray(lp, dtype=np.int16),
        np.asarray(line, dtype=np.int64),
    )


def batched(rows: Iterable[Row], size: int) -> Iterator[Chunk]:
    """Rows gathered into chunks of ``size`` (the last one possibly empty)."""
    batch: list[Row] = []
    for row in rows:
        batch.append(row)
        if len(batch) == size:
            yield to_chunk(batch)
            batch = []
    yield to_chunk(batch)


def pairs_of(chunks: Iterable[Chunk], langs: LangPairIds, label: str) -> list[ParallelPair]:
    """The pairs of ``chunks`` as objects, each with origin ``label:line`` (the in-memory readers)."""
    out: list[ParallelPair] = []
    for src, tgt, lp, line in chunks:
        names = list(langs.ids)  # ids are numbered in insertion order; the chunk may have added some
        for s, t, k, no in zip(src.to_pylist(), tgt.to_pylist(), lp.tolist(), line.tolist(), strict=True):
            out.append(ParallelPair(s, t, *names[k], f"{label}:{no}"))
    return out
