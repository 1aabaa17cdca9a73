"""Corpora larger than RAM: a parallel corpus converted once into a memory-mapped Arrow cache.

``--data`` items (TSV files, ``aligned:SRC_FILE+TGT_FILE`` pairs, JSON Lines/JSON, CSV and Parquet
files or folders of them, ``Dataset.save_to_disk`` folders and Hub dataset ids) are read once by the
one row reader of their format (`babelspace.data.text_rows`, `babelspace.data.data_files`,
`babelspace.data.dataset_rows`: the readers evaluation uses too, so the ``path:line`` errors, the
``--skip-bad-lines`` reasons and the counts are the same code), and written to
``<cache>/corpora/<key>/``:

- ``pairs.arrow``: an Arrow IPC file of record batches (``src``, ``tgt``, ``line``), memory-mapped
  when read, so a process holds only the pages it touches, and gives them back after each read
  (`_Mapping`: random reads would otherwise keep a window of the file per row read mapped, so the
  resident memory of a run would grow with the corpus);
- ``lang_pair.bin`` (int16), ``src_length.bin`` (int32, characters), ``text_id.bin`` (uint64
  [rows, 2], an xxh3 hash of each normalised text): the integer arrays the sampler works on
  (`babelspace.data.sampling.PairArrays`), memory-mapped too;
- ``meta.json``: the language pairs, the read report, the format version, the sizes of the other
  files and a checksum, written last.

The key is an xxh3-128 hash of the source's bytes (both files of an aligned pair; every data file of
a folder; the Arrow files of a dataset) and of the reading options, so a changed file is converted
again and never read stale.
A conversion writes into a temporary folder renamed into place at the end: a kill leaves no
half-written cache, and two processes converting the same file both end up reading one complete copy.
Every open checks the folder against its files (`babelspace.data.arrow_cache`: sizes and checksum;
here: that ``pairs.arrow`` reads and holds the rows ``meta.json`` says); a damaged folder is reported
in one line and converted again. Because the key is the content, two copies of one file share one
conversion: the labels, origins (``path:line``) and report name the path given this time.
"""

from __future__ import annotations

import json
import logging
import mmap
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import xxhash

from babelspace.data.arrow_cache import (
    FORMAT_VERSION,
    CacheDamaged,
    build,
    content_key,
    need_bytes,
    read_meta,
    write_meta,
)
from babelspace.data.corpus_rows import Chunk, LangPairIds, batched
from babelspace.data.data_files import data_file_rows, data_files, size_and_rows
from babelspace.data.dataset_rows import CorpusColumns, dataset_rows, load_dataset_split, resolve_columns
from babelspace.data.formats import corpus_format
from babelspace.data.hub import load_hub
from babelspace.data.lines import BadLines
from babelspace.data.mix import UnknownCorpus, parse_corpus
from babelspace.data.pairs import ParallelPair, ReadReport
from babelspace.data.text_blocks import text_hash
from babelspace.data.text_rows import aligned_file_rows, tsv_chunks
from babelspace.errors import CorpusFormatError, ResourceError

__all__ = ["ArrowCorpus", "CorpusRows", "ReadOptions", "open_corpus"]

logger = logging.getLogger(__name__)

#: Rows per Arrow record batch (large batches: few Python-level writes).
BATCH_ROWS = 65536
#: Rows `ArrowCorpus.take` reads between two releases of the mapped pages.
TAKE_ROWS = 256


@dataclass(frozen=True)
class ReadOptions:
    """How a corpus is read (part of its cache key)."""

    src_lang: str | None = None
    tgt_lang: str | None = None
    skip_bad_lines: bool = False
    columns: CorpusColumns = CorpusColumns()
    split: str | None = None  # a DatasetDict's split (unset: its only one, else train); Hub: train

    def key(self) -> str:
        cols = self.columns
        return json.dumps(
            [FORMAT_VERSION, self.src_lang, self.tgt_lang, self.skip_bad_lines, cols.names(), self.split]
        )


# ---------------------------------------------------------------------------------------- writing
class _Writer:
    """Appends rows to ``pairs.arrow`` and the integer arrays, one record batch at a time."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        schema = pa.schema([("src", pa.string()), ("tgt", pa.string()), ("line", pa.int64())])
        self._sink = pa.OSFile(str(folder / "pairs.arrow"), "wb")
        self._arrow = pa.ipc.new_file(self._sink, schema)
        self._bins = {
            name: (folder / f"{name}.bin").open("wb") for name in ("lang_pair", "src_length", "text_id")
        }
        self.rows = 0

    def write(self, chunk: Chunk) -> None:
        src, tgt, lp, line = chunk
        if not len(src):
            return
        self._arrow.write_batch(pa.record_batch([src, tgt, pa.array(line)], names=["src", "tgt", "line"]))
        self._bins["lang_pair"].write(np.ascontiguousarray(lp, dtype=np.int16).tobytes())
        lengths = pc.utf8_length(src).to_numpy(zero_copy_only=False).astype(np.int32)
        self._bins["src_length"].write(lengths.tobytes())
        self._bins["text_id"].write(np.stack([text_hash(src), text_hash(tgt)], axis=1).tobytes())
        self.rows += len(src)

    def close(self) -> None:
        self._arrow.close()
        self._sink.close()
        for f in self._bins.values():
            f.close()


def _convert(
    chunks: Iterable[Chunk], folder: Path, report: ReadReport, langs: LangPairIds, label: str
) -> None:
    writer = _Writer(folder)
    try:
        for chunk in chunks:
            writer.write(chunk)
    finally:
        writer.close()
    report.kept = writer.rows
    meta = {
        "rows": writer.rows,
        "label": label,
        "lang_pairs": [list(k) for k in langs.ids],
        "report": {
            "source": report.source,
            "read": report.read,
            "kept": report.kept,
            "skipped": report.skipped,
        },
    }
    write_meta(folder, meta)


# ---------------------------------------------------------------------------------------- the cache
class ArrowCorpus:
    """A converted corpus: memory-mapped texts and integer arrays, and the report of its reading.

    ``label`` names the rows' origins (``label:line``) and ``source`` the report: the path given this
    run, whichever copy of the content was converted first. Raises `CacheDamaged` when the folder
    does not match its files."""

    def __init__(self, folder: Path, label: str, source: str) -> None:
        self.folder = folder
        meta = read_meta(folder)
        self.label = label
        self.lang_pairs: list[tuple[str, str]] = [tuple(k) for k in meta["lang_pairs"]]
        r = meta["report"]
        self.report = ReadReport(source, r["read"], r["kept"], dict(r["skipped"]))
        self.num_rows = int(meta["rows"])
        self._maps: list[_Mapping] = []
        batches = _record_batches(self._map(folder / "pairs.arrow"), self.num_rows)
        self._starts = np.cumsum([0] + [b.num_rows for b in batches])
        self._src = [_Strings(b.column(0)) for b in batches]
        self._tgt = [_Strings(b.column(1)) for b in batches]
        self._line = [b.column(2).to_numpy() for b in batches]
        self.lang_pair = self._bin("lang_pair", np.int16)
        self.src_length = self._bin("src_length", np.int32)
        self.text_id = self._bin("text_id", np.uint64, 2)
        if self.num_rows and int(self.lang_pair.max()) >= len(self.lang_pairs):
            raise CacheDamaged("lang_pair.bin names a language pair meta.json does not list")

    def _bin(self, name: str, dtype: type, width: int = 1) -> np.ndarray:
        """A memory-mapped integer array of `num_rows` rows (`CacheDamaged` for another length)."""
        path = self.folder / f"{name}.bin"
        size = path.stat().st_size
        if size != self.num_rows * width * np.dtype(dtype).itemsize:
            raise CacheDamaged(f"{path.name} holds {size} bytes, not the {self.num_rows} rows of meta.json")
        if size == 0:
            return np.zeros((0, width) if width > 1 else 0, dtype=dtype)
        array = np.frombuffer(self._map(path).map, dtype=dtype)
        return array.reshape(-1, width) if width > 1 else array

    def _map(self, path: Path) -> _Mapping:
        try:
            self._maps.append(_Mapping(path))
        except (OSError, ValueError) as exc:  # ValueError: an empty file
            raise CacheDamaged(f"{path.name} cannot be memory-mapped ({exc})") from None
        return self._maps[-1]

    def release(self) -> None:
        """Give back the pages of the corpus files that reads mapped into this process."""
        for m in self._maps:
            m.release()

    def column(self, name: str, rows: np.ndarray) -> np.ndarray:
        """A copy of the integer array ``name`` (``lang_pair``, ``src_length``, ``text_id``) at
        ``rows``, the pages read given back."""
        out = np.array(getattr(self, name)[rows])
        self.release()
        return out

    def __len__(self) -> int:
        return self.num_rows

    def take(self, rows: np.ndarray) -> list[ParallelPair]:
        """The pairs at ``rows`` (row numbers of the converted corpus), in that order: read straight
        from the mapped record batches (a take over the whole table would gather every batch)."""
        rows = np.asarray(rows, dtype=np.int64)
        out: list[ParallelPair] = []
        for start in range(0, len(rows), TAKE_ROWS):
            out += self._take(rows[start : start + TAKE_ROWS])
            self.release()
        return out

    def _take(self, rows: np.ndarray) -> list[ParallelPair]:
        which = np.searchsorted(self._starts, rows, side="right") - 1
        local = (rows - self._starts[which]).tolist()
        label, names = self.label, self.lang_pairs
        out = []
        for k, j, lp in zip(which.tolist(), local, self.lang_pair[rows].tolist(), strict=True):
            no = int(self._line[k][j])
            out.append(ParallelPair(self._src[k][j], self._tgt[k][j], *names[lp], f"{label}:{no}"))
        return out

    def texts(self, side: int) -> Iterator[list[str]]:
        """The texts of one side (0: sources, 1: targets) in row order, one record batch at a time."""
        for strings in (self._src, self._tgt)[side]:
            texts = [strings[j] for j in range(len(strings.offsets) - 1)]
            self.release()
            yield texts


def _record_batches(mapped: _Mapping, rows: int) -> list[pa.RecordBatch]:
    """The record batches of ``pairs.arrow``, memory-mapped; `CacheDamaged` unless they read and hold
    ``rows`` rows of (src, tgt, line)."""
    path = mapped.path
    try:
        reader = pa.ipc.open_file(pa.py_buffer(mapped.map))
        batches = [reader.get_batch(i) for i in range(reader.num_record_batches)]
        for b in batches:
            b.validate()
    except (pa.ArrowException, OSError) as exc:
        raise CacheDamaged(f"{path.name} is not a readable Arrow file ({exc})") from None
    if reader.schema.names != ["src", "tgt", "line"]:
        raise CacheDamaged(f"{path.name} has columns {reader.schema.names}, not src, tgt, line")
    found = sum(b.num_rows for b in batches)
    if found != rows:
        raise CacheDamaged(f"{path.name} holds {found} rows, meta.json says {rows}")
    return batches


class _Mapping:
    """A read-only memory map of one file whose pages this process can give back. A read maps the
    kernel's fault-around window (64 KB by default, whatever ``MADV_RANDOM`` says) of a file that is in
    the page cache, so the rows drawn at random from a large corpus (the fit samples, the batches)
    would keep about 64 KB per row resident; `release` unmaps them (``MADV_DONTNEED``: a read-only
    file mapping reads them again from the page cache or the file when next touched). Without
    ``madvise`` (Windows) `release` does nothing."""

    def __init__(self, path: Path) -> None:
        self.path = path
        with path.open("rb") as f:
            self.map = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)

    def release(self) -> None:
        if hasattr(mmap, "MADV_DONTNEED") and hasattr(self.map, "madvise"):
            self.map.madvise(mmap.MADV_DONTNEED)


class _Strings:
    """One string column of a mapped record batch: ``strings[j]`` decodes row j's bytes only."""

    def __init__(self, column: pa.Array) -> None:
        column = column.cast(pa.large_string()) if column.type != pa.string() else column
        width = np.int64 if column.type == pa.large_string() else np.int32
        n = len(column)
        self.offsets = np.frombuffer(column.buffers()[1], dtype=width)[column.offset : column.offset + n + 1]
        self.data = memoryview(column.buffers()[2] or b"")

    def __getitem__(self, j: int) -> str:
        return str(self.data[self.offsets[j] : self.offsets[j + 1]], "utf-8")


class CorpusRows(Sequence[ParallelPair]):
    """The pairs of an `ArrowCorpus` at an array of row numbers: a sequence that builds a
    `ParallelPair` only for the rows asked for."""

    def __init__(self, corpus: ArrowCorpus, rows: np.ndarray | None = None) -> None:
        self.corpus = corpus
        self.rows = np.arange(len(corpus), dtype=np.int64) if rows is None else rows

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i):  # type: ignore[override]
        if isinstance(i, slice):
            return CorpusRows(self.corpus, self.rows[i])
        return self.corpus.take(self.rows[[i]])[0]

    def __iter__(self) -> Iterator[ParallelPair]:
        for start in range(0, len(self.rows), BATCH_ROWS):
            yield from self.corpus.take(self.rows[start : start + BATCH_ROWS])

    def take(self, idx: np.ndarray) -> list[ParallelPair]:
        return self.corpus.take(self.rows[np.asarray(idx, dtype=np.int64)])

    def subset(self, idx: np.ndarray) -> CorpusRows:
        return CorpusRows(self.corpus, self.rows[idx])


# ---------------------------------------------------------------------------------------- opening
def open_corpus(spec: str, opts: ReadOptions, cache: Path) -> ArrowCorpus:
    """The converted corpus of a ``--data`` item (`babelspace.data.mix.parse_corpus`): a TSV file,
    ``aligned:SRC_FILE+TGT_FILE``, a JSON Lines/JSON, CSV or Parquet file or folder of them, a
    ``save_to_disk`` folder or a Hub dataset id (converted now if its cache is missing or stale)."""
    root = cache / "corpora"
    try:
        item = parse_corpus(spec)
    except UnknownCorpus:
        raise ResourceError(
            f"corpus not found: {spec!r}. Give 'bible', a dataset directory, a TSV, JSON Lines, CSV or "
            "Parquet file, two line-aligned files as 'aligned:SRC_FILE+TGT_FILE', or a Hub dataset id"
        ) from None
    if item.aligned is not None:
        return _open_files(list(item.aligned), spec, opts, root)
    path = Path(item.name)
    if not path.exists():  # parse_corpus took it for a Hub dataset id
        return _open_dataset(load_hub(spec, opts.split or "train"), spec, opts, root)
    kind = corpus_format(path)
    if kind == "dataset":
        return _open_dataset(load_dataset_split(path, opts.split, flag="--split ")[0], spec, opts, root)
    if kind == "tsv":
        return _open_files([path], spec, opts, root)
    if kind == "mined":
        raise CorpusFormatError(path, None, "babelspace mine output is read in memory, not converted")
    return _open_data_files(path, spec, opts, root)


def _open_files(paths: list[Path], label: str, opts: ReadOptions, root: Path) -> ArrowCorpus:
    """A TSV file, or two line-aligned files."""
    key, lines = content_key(paths, opts.key())
    source = ",".join(map(str, paths))

    def make_rows(report: ReadReport, langs: LangPairIds) -> Iterable[Chunk]:
        bad = BadLines(report, opts.skip_bad_lines)
        if len(paths) == 1:
            return tsv_chunks(paths[0], opts.src_lang, opts.tgt_lang, bad, langs)
        return batched(aligned_file_rows(paths, opts.src_lang, opts.tgt_lang, bad, langs), BATCH_ROWS)

    size = sum(p.stat().st_size for p in paths)
    return _cached(root, key, make_rows, label, source, need_bytes(size, lines))


def _open_data_files(path: Path, label: str, opts: ReadOptions, root: Path) -> ArrowCorpus:
    """A JSON Lines/JSON, CSV or Parquet file, or a folder of them, streamed through ``datasets``."""
    fmt, files = data_files(path, opts.split)
    key, lines = content_key(files, json.dumps([opts.key(), fmt]))
    langs_given = (opts.src_lang, opts.tgt_lang)

    def make_rows(report: ReadReport, langs: LangPairIds) -> Iterable[Chunk]:
        bad = BadLines(report, opts.skip_bad_lines)
        return batched(data_file_rows(fmt, files, opts.columns, langs_given, bad, langs), BATCH_ROWS)

    size, rows = size_and_rows(fmt, files, lines)
    return _cached(root, key, make_rows, label, label, need_bytes(size, rows))


def _open_dataset(ds: Any, label: str, opts: ReadOptions, root: Path) -> ArrowCorpus:
    cols = resolve_columns(ds.column_names, opts.columns, label)
    options = json.dumps([opts.key(), cols.names()])  # the columns read, found in the table
    files = [Path(f["filename"]) for f in ds.cache_files]
    if files:
        key = content_key(files, options)[0]
    else:
        key = xxhash.xxh3_128(f"{ds._fingerprint}{options}").hexdigest()
    langs_given = (opts.src_lang, opts.tgt_lang)

    def make_rows(report: ReadReport, langs: LangPairIds) -> Iterable[Chunk]:
        bad = BadLines(report, opts.skip_bad_lines)
        batches = ds.select_columns(cols.names()).iter(batch_size=BATCH_ROWS)
        return batched(dataset_rows(batches, label, cols, langs_given, bad, langs), BATCH_ROWS)

    size = sum(f.stat().st_size for f in files)
    return _cached(root, key, make_rows, label, label, need_bytes(size, len(ds)))


def _cached(root: Path, key: str, make_rows, label: str, source: str, need: int) -> ArrowCorpus:
    """The corpus of cache folder ``key``, converted with ``make_rows(report, langs)`` when missing or
    damaged (`babelspace.data.arrow_cache.build`)."""

    def convert(folder: Path) -> None:
        report, langs = ReadReport(source), LangPairIds()
        _convert(make_rows(report, langs), folder, report, langs, label)

    corpus = build(root, key, convert, lambda folder: ArrowCorpus(folder, label, source), label, need)
    logger.info(corpus.report.summary())
    return corpus
