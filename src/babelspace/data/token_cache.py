"""Token tables: the texts of a corpus tokenized once (per tokenizer, max length and prompt) and
memory-mapped when read, so that the input pipeline looks token ids up instead of tokenizing.

A table is a folder of

- ``ids.bin``: every text's token ids, one text after the other (int32);
- ``offsets.bin``: where each text's ids start, and the end of the last (int64, texts + 1);
- ``src.bin``, ``tgt.bin`` (int64, one per row): the text of each row's source and target, when
  the texts are a list's distinct texts; absent when the texts are the rows' sources then their
  targets, in row order (a converted corpus);
- ``meta.json``: rows, texts, what was tokenized (the key), the sizes of the other files and a
  checksum, written last (`babelspace.data.arrow_cache.write_meta`).

`cached_table` builds a missing table into a hidden temporary folder beside it
(`babelspace.writable.temp_sibling`) and renames it into place, so a kill leaves no half-written
table and two processes building one both end up reading one complete copy. Every open checks the
folder against its files (sizes, checksum, offsets that fit ``ids.bin``); a damaged table is said in
one line, removed and built again. The encoding itself is the caller's (``encode(texts)`` ->
``(ids, lengths)``; the training side uses `babelspace.models.token_ids.encode_ids`), called on
chunks of `CHUNK_TEXTS` texts: the fast tokenizer's batch encoding, which the tokenizers library
spreads over the cores unless ``TOKENIZERS_PARALLELISM`` is false.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from babelspace.data.arrow_cache import CacheDamaged, discard, publish, read_meta, write_meta
from babelspace.errors import ResourceError
from babelspace.progress import Progress
from babelspace.writable import temp_sibling

__all__ = ["CHUNK_TEXTS", "TokenTable", "cached_table", "distinct_texts", "open_table", "write_table"]

logger = logging.getLogger(__name__)

#: Texts per call of the encoder while a table is built.
CHUNK_TEXTS = 16_384
KIND = "babelspace-token-table"
VERSION = 1
_FILES = ("ids.bin", "offsets.bin")
_ROW_FILES = ("src.bin", "tgt.bin")
#: ``encode(texts) -> (ids, lengths)``: int32 ids one text after the other, and each text's length.
Encode = Callable[[Sequence[str]], tuple[np.ndarray, np.ndarray]]


def _mapped(path: Path, dtype: type, count: int) -> np.ndarray:
    """``path`` as a read-only array of ``count`` items (`CacheDamaged` for another size)."""
    size = path.stat().st_size if path.exists() else -1
    if size != count * np.dtype(dtype).itemsize:
        raise CacheDamaged(f"{path.name} holds {size} bytes, not {count} values")
    if count == 0:
        return np.zeros(0, dtype=dtype)
    return np.memmap(path, dtype=dtype, mode="r").view(np.ndarray)


class TokenTable:
    """An opened token table (`CacheDamaged` when the folder does not match its files)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        meta = read_meta(folder)
        if meta.get("kind") != KIND or meta.get("version") != VERSION:
            raise CacheDamaged(f"meta.json is not a version {VERSION} token table")
        self.key, self.rows, self.texts = str(meta["key"]), int(meta["rows"]), int(meta["texts"])
        self.offsets = _mapped(folder / "offsets.bin", np.int64, self.texts + 1)
        total = int(self.offsets[-1])
        self.ids = _mapped(folder / "ids.bin", np.int32, total)
        if self.offsets[0] != 0:
            raise CacheDamaged("offsets.bin does not start at 0")
        self.sides: tuple[np.ndarray, np.ndarray] | None = None
        if meta["row_texts"]:
            self.sides = tuple(_mapped(folder / name, np.int64, self.rows) for name in _ROW_FILES)  # type: ignore[assignment]
            if self.rows and max(int(s.max()) for s in self.sides) >= self.texts:
                raise CacheDamaged("src.bin or tgt.bin names a text the table does not hold")
        elif self.texts != 2 * self.rows:
            raise CacheDamaged(f"{self.texts} texts for {self.rows} rows, not two per row")

    def __getstate__(self) -> dict[str, Any]:  # a worker started by spawn maps the files itself
        return {"folder": self.folder}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["folder"])  # type: ignore[misc]

    def text_index(self, rows: np.ndarray, side: int) -> np.ndarray:
        """The texts of ``side`` (0: source, 1: target) of ``rows``."""
        if self.sides is not None:
            return self.sides[side][rows]
        return rows + side * self.rows

    def lookup(self, texts: np.ndarray) -> list[np.ndarray]:
        """The ids of ``texts`` (views of the mapped file)."""
        starts, ends = self.offsets[texts].tolist(), self.offsets[texts + 1].tolist()
        ids = self.ids
        return [ids[a:b] for a, b in zip(starts, ends, strict=True)]

    def lengths(self, texts: np.ndarray) -> np.ndarray:
        return self.offsets[texts + 1] - self.offsets[texts]


def distinct_texts(pairs: Sequence[Any]) -> tuple[list[str], np.ndarray, np.ndarray]:
    """The distinct texts of both sides of ``pairs`` (in order of first appearance) and, per pair,
    the index of its source and of its target among them."""
    index: dict[str, int] = {}
    n = len(pairs)
    src = np.fromiter((index.setdefault(p.src, len(index)) for p in pairs), dtype=np.int64, count=n)
    tgt = np.fromiter((index.setdefault(p.tgt, len(index)) for p in pairs), dtype=np.int64, count=n)
    return list(index), src, tgt


def write_table(
    folder: Path,
    chunks: Iterable[Sequence[str]],
    counts: tuple[int, int],
    encode: Encode,
    key: str,
    label: str,
    sides: tuple[np.ndarray, np.ndarray] | None = None,
) -> None:
    """Write a table into ``folder`` (an empty folder): the texts of ``chunks`` (``counts``: rows,
    texts) tokenized by ``encode``; ``sides``: each row's source and target text (None: the texts
    are the sources then the targets, in row order)."""
    rows, texts = counts
    end, seen = 0, 0
    with (
        (folder / "ids.bin").open("wb") as ids,
        (folder / "offsets.bin").open("wb") as offsets,
        Progress(total=texts, desc=f"tokenizing {label}", unit="text") as bar,
    ):
        offsets.write(np.zeros(1, dtype=np.int64).tobytes())
        for chunk in chunks:
            for start in range(0, len(chunk), CHUNK_TEXTS):
                part = chunk[start : start + CHUNK_TEXTS]
                flat, lengths = encode(part)
                ids.write(np.ascontiguousarray(flat, dtype=np.int32).tobytes())
                offsets.write((end + np.cumsum(lengths, dtype=np.int64)).tobytes())
                end += int(lengths.sum())
                seen += len(part)
                bar.update(len(part))
    if seen != texts:
        raise ValueError(f"{label}: {seen} texts tokenized, {texts} expected")
    files = list(_FILES)
    if sides is not None:
        for name, side in zip(_ROW_FILES, sides, strict=True):
            (folder / name).write_bytes(np.ascontiguousarray(side, dtype=np.int64).tobytes())
        files += _ROW_FILES
    meta = {"kind": KIND, "version": VERSION, "key": key, "rows": rows, "texts": texts}
    write_meta(folder, {**meta, "row_texts": sides is not None}, files)


def open_table(folder: Path, label: str) -> TokenTable | None:
    """The sound table in ``folder``; None when there is none (a damaged one is said and removed)."""
    if not folder.exists():
        return None
    try:
        return TokenTable(folder)
    except CacheDamaged as why:
        logger.warning("%s: the token table %s is damaged (%s): building it again", label, folder, why)
        discard(folder)
        return None


def cached_table(folder: Path, write: Callable[[Path], None], label: str) -> TokenTable:
    """The table in ``folder``, written by ``write(tmp)`` first when it is missing or damaged.
    A failed write (a full disk, a read-only cache) raises `ResourceError` in one line."""
    found = open_table(folder, label)
    if found is not None:
        return found
    failed = f"writing the token table {folder} failed ({{}})"
    tmp = temp_sibling(folder)
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        tmp.mkdir()
    except OSError as exc:  # a read-only or full cache
        raise ResourceError(failed.format(exc.strerror or exc)) from None
    return publish(
        folder,
        tmp,
        write,
        lambda: open_table(folder, label),  # another process built it first
        TokenTable,
        failed=failed,
        unreadable=f"{label}: the token table just written to {folder} does not read back ({{}})",
    )
