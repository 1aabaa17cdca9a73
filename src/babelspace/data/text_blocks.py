"""Vectorised pieces of the corpus conversion: files read in blocks of lines, clean TSV blocks split
and checked with Arrow compute, and a text hash computed over an Arrow string array at once.

A block is handled here only when it is clean (valid UTF-8, every line of the file's width, no side
empty, known language codes); any other block goes line by line through the reader's rules
(`babelspace.data.arrow_corpus`), so errors and skipped-line counts are exactly those of
`babelspace.data.readers.read_tsv`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import xxhash

from babelspace.data.lines import UTF8_BOM

__all__ = ["line_blocks", "text_hash", "tsv_block"]

BLOCK_BYTES = 1 << 24
#: Characters `str.split()` treats as whitespace besides the plain space (so `normalize_whitespace`
#: changes a text exactly when it holds one of these, two spaces in a row, or an outer space).
_NEEDS_NORMALIZING = (
    r"[\t\n\x0b\x0c\r\x1c-\x1f\x{85}\x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}\x{202f}\x{205f}"
    r"\x{3000}]|  |^ | $"
)


def line_blocks(path: Path) -> Iterator[tuple[int, list[bytes]]]:
    """``(first line number, lines)`` of ``path`` read in large blocks: lines as
    `babelspace.data.lines.split_lines` makes them (no BOM, no ``\\n``, one ``\\r`` before it
    dropped), blank lines at the very end of the file left out."""
    carry, pending, line_no = b"", [], 1
    with path.open("rb") as f:
        first = True
        while data := f.read(BLOCK_BYTES):
            if first:
                data, first = data.removeprefix(UTF8_BOM), False
            data = carry + data
            cut = data.rfind(b"\n")
            if cut < 0:
                carry = data
                continue
            carry = data[cut + 1 :]
            lines = pending + data[:cut].split(b"\n")
            if b"\r" in data:
                lines = [ln.removesuffix(b"\r") for ln in lines]
            keep = len(lines)
            while keep and not lines[keep - 1].strip():  # blank lines: held until a line follows
                keep -= 1
            pending = lines[keep:]
            if keep:
                yield line_no, lines[:keep]
                line_no += keep
    last = carry.removesuffix(b"\r")
    if last.strip():
        yield line_no, [*pending, last]


class TsvLayout:
    """The width the file's first good line fixed (0: none yet), its line, and the language pair
    of 2-column lines (None: not given)."""

    def __init__(self, default: int | None) -> None:
        self.width, self.first, self.default = 0, 0, default


def tsv_block(
    lines: list[bytes], first_no: int, layout: TsvLayout, lang_pair: Callable[[str, str], int | str]
) -> tuple[pa.Array, pa.Array, np.ndarray, np.ndarray] | None:
    """``(src, tgt, lang_pair_ids, line_numbers)`` of a clean block, else None (then the block goes
    line by line). ``lang_pair`` maps a row's two codes to an id, or to a string when they are bad."""
    try:
        text = pa.array(lines, pa.binary()).cast(pa.string())
    except pa.ArrowInvalid:  # not UTF-8 somewhere
        return None
    parts = pc.split_pattern(text, "\t")
    counts = pc.list_value_length(parts).to_numpy()
    width = layout.width or int(counts[0])
    if width not in (2, 4) or not (counts == width).all() or (width == 2 and layout.default is None):
        return None
    src, tgt = (_normalized(pc.list_element(parts, k)) for k in (0, 1))
    if src is None or tgt is None:
        return None
    if width == 2:
        ids = np.full(len(lines), layout.default, dtype=np.int16)
    else:
        ids = _lang_ids(pc.list_element(parts, 2), pc.list_element(parts, 3), lang_pair)
        if ids is None:
            return None
    if not layout.width:
        layout.width, layout.first = width, first_no
    return src, tgt, ids, np.arange(first_no, first_no + len(lines), dtype=np.int64)


def _normalized(texts: pa.Array) -> pa.Array | None:
    """The texts whitespace-normalised (only those that need it go through Python); None when one
    of them is empty after that."""
    flagged = np.flatnonzero(
        pc.match_substring_regex(texts, _NEEDS_NORMALIZING).to_numpy(zero_copy_only=False)
    )
    if len(flagged):
        values = texts.to_pylist()
        for i in flagged.tolist():
            values[i] = " ".join(values[i].split())
        texts = pa.array(values, pa.string())
    if pc.any(pc.equal(pc.utf8_length(texts), 0)).as_py():
        return None
    return texts


def _lang_ids(sl: pa.Array, tl: pa.Array, lang_pair: Callable[[str, str], int | str]) -> np.ndarray | None:
    codes = pc.binary_join_element_wise(sl, tl, "\t").dictionary_encode()
    mapped = [lang_pair(*pair.split("\t")) for pair in codes.dictionary.to_pylist()]
    if any(isinstance(m, str) for m in mapped):
        return None
    return np.asarray(mapped, dtype=np.int16)[codes.indices.to_numpy()]


# ------------------------------------------------------------------------------------------ hashing
def text_hash(texts: pa.Array) -> np.ndarray:
    """xxh3-64 of each text's UTF-8 bytes, read straight from the Arrow buffers (no Python strings):
    equal texts get equal ids, different texts different ones but with negligible probability."""
    texts = texts.cast(pa.large_string())
    n = len(texts)
    offsets = np.frombuffer(texts.buffers()[1], dtype=np.int64)[texts.offset : texts.offset + n + 1].tolist()
    data = memoryview(texts.buffers()[2] or b"")
    digest = xxhash.xxh3_64_intdigest
    return np.fromiter(
        (digest(data[a:b]) for a, b in zip(offsets[:-1], offsets[1:], strict=True)), dtype=np.uint64, count=n
    )
