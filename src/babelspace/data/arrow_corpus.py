"""Corpora larger than RAM: a parallel corpus converted once into a memory-mapped Arrow cache.

``--data`` files (TSV, two line-aligned files), ``Dataset.save_to_disk`` folders and Hub dataset
ids are read once, validated row by row exactly as `babelspace.data.readers` does (the same
``path:line`` errors, the same ``--skip-bad-lines`` reasons and counts), and written to
``<cache>/corpora/<key>/``:

- ``pairs.arrow``: an Arrow IPC file of record batches (``src``, ``tgt``, ``line``), memory-mapped
  when read, so a process holds only the pages it touches;
- ``lang_pair.bin`` (int16), ``src_length.bin`` (int32, characters), ``text_id.bin`` (uint64
  [rows, 2], an xxh3 hash of each normalised text): the integer arrays the sampler works on
  (`babelspace.data.sampling.PairArrays`), memory-mapped too;
- ``meta.json``: the language pairs, the read report, the format version, the sizes of the other
  files and a checksum, written last.

The key is an xxh3-128 hash of the source's bytes (both files of an aligned pair; the Arrow files of
a dataset) and of the reading options, so a changed file is converted again and never read stale.
A conversion writes into a temporary folder renamed into place at the end: a kill leaves no
half-written cache, and two processes converting the same file both end up reading one complete copy.
Every open checks the folder against its files (`babelspace.data.arrow_cache`: sizes and checksum;
here: that ``pairs.arrow`` reads and holds the rows ``meta.json`` says); a damaged folder is reported
in one line and converted again. Because the key is the content, two copies of one file share one
conversion: the labels, origins (``path:line``) and report name the path given this time.
"""

from __future__ import annotations

import itertools
import json
import logging
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
from babelspace.data.hub import HUB_ID, is_hub_id
from babelspace.data.languages import is_valid_lang, validate_lang
from babelspace.data.lines import (
    INVALID_UTF8,
    UTF8_BOM,
    WRONG_COLUMN_COUNT,
    BadLines,
    check_aligned,
    decode_line,
)
from babelspace.data.pairs import ParallelPair, ReadReport, normalize_whitespace
from babelspace.data.readers import file_lang, load_dataset_split, looks_like_tsv
from babelspace.data.text_blocks import TsvLayout, line_blocks, text_hash, tsv_block
from babelspace.errors import CorpusFormatError, ResourceError

__all__ = ["ArrowCorpus", "CorpusColumns", "CorpusRows", "ReadOptions", "open_corpus"]

logger = logging.getLogger(__name__)

#: Rows per Arrow record batch (large batches: few Python-level writes).
BATCH_ROWS = 65536
#: One chunk of converted rows: sources, targets, language-pair ids, line numbers.
Chunk = tuple[pa.Array, pa.Array, np.ndarray, np.ndarray]
_TSV_HINT = "columns are src, tgt[, src_lang, tgt_lang] separated by tabs"


@dataclass(frozen=True)
class CorpusColumns:
    """Which columns of a dataset hold the texts (and, optionally, each row's languages)."""

    src: str = "src"
    tgt: str = "tgt"
    src_lang: str | None = None
    tgt_lang: str | None = None

    def names(self) -> list[str]:
        return [c for c in (self.src, self.tgt, self.src_lang, self.tgt_lang) if c is not None]


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


# ---------------------------------------------------------------------------------------- reading rows
def _stream_lines(path: Path) -> Iterator[tuple[int, bytes]]:
    """``(line_no, raw)`` as `babelspace.data.lines.split_lines` splits them, streamed: no BOM, no
    line ending, blank lines at the very end left out (held back until a non-blank line follows)."""
    pending: list[tuple[int, bytes]] = []
    with path.open("rb", buffering=1 << 22) as f:
        for no, raw in enumerate(f, 1):
            if no == 1:
                raw = raw.removeprefix(UTF8_BOM)
            raw = raw.removesuffix(b"\n").removesuffix(b"\r")
            if not raw.strip():
                pending.append((no, raw))
                continue
            if pending:
                yield from pending
                pending.clear()
            yield no, raw


class _Langs:
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


def _tsv_chunks(path: Path, opts: ReadOptions, bad: BadLines, langs: _Langs) -> Iterator[Chunk]:
    """Chunks of the good TSV lines (`readers.read_tsv`'s rules): clean blocks at once
    (`text_blocks.tsv_block`), any other block line by line."""
    default = None
    if opts.tgt_lang is not None:
        default = langs.of(validate_lang(opts.src_lang or "en"), validate_lang(opts.tgt_lang))
    layout = TsvLayout(default)
    for first_no, lines in line_blocks(path):
        chunk = tsv_block(lines, first_no, layout, lambda a, b: langs.of_codes((a, b)))
        if chunk is not None:
            bad.report.read += len(lines)
            yield chunk
        else:
            yield _chunk(list(_tsv_rows(path, enumerate(lines, first_no), layout, bad, langs)))


def _tsv_rows(
    path: Path, lines: Iterable[tuple[int, bytes]], layout: TsvLayout, bad: BadLines, langs: _Langs
) -> Iterator[tuple]:
    """``(src, tgt, lang_pair_id, line)`` of every good line, one by one."""
    report = bad.report
    for line_no, raw in lines:
        report.read += 1
        text, detail = decode_line(raw)
        if text is None:
            bad(path, line_no, INVALID_UTF8, detail)
            continue
        cols = text.split("\t")
        if not layout.width and len(cols) in (2, 4):
            layout.width, layout.first = len(cols), line_no
        if len(cols) != layout.width:
            expected = (
                f"expected {layout.width} as on line {layout.first}" if layout.width else "expected 2 or 4"
            )
            bad(
                path,
                line_no,
                WRONG_COLUMN_COUNT,
                f"({len(cols)} tab-separated columns; {expected})",
                _TSV_HINT,
            )
            continue
        if layout.width == 2 and layout.default is None:
            raise CorpusFormatError(
                path,
                line_no,
                "2-column TSV without language columns, and no target language was given",
                hint="pass --tgt-lang (and --src-lang if the source is not English), "
                "or add src_lang and tgt_lang as columns 3 and 4",
            )
        row = _row(path, line_no, cols, layout.default, bad, langs)
        if row is not None:
            yield row


def _row(path: Path, line_no: int, cols: list, default: int | None, bad: BadLines, langs: _Langs):
    src, tgt = " ".join(cols[0].split()), " ".join(cols[1].split())
    if not src or not tgt:
        bad(path, line_no, "empty side", "(source)" if not src else "(target)")
        return None
    lp = default if len(cols) == 2 else langs.of_codes((cols[2], cols[3]))
    if isinstance(lp, str):
        bad(path, line_no, "unknown language code", lp)
        return None
    return src, tgt, lp, line_no


def _aligned_rows(paths: list[Path], opts: ReadOptions, bad: BadLines, langs: _Langs) -> Iterator[tuple]:
    """``(src, tgt, lang_pair_id, line)`` of two line-aligned files (`readers.read_aligned`'s rules)."""
    lp = langs.of(file_lang(paths[0], opts.src_lang, "src"), file_lang(paths[1], opts.tgt_lang, "tgt"))
    counts = [0, 0]
    for line_no, (a, b) in enumerate(itertools.zip_longest(*map(_stream_lines, paths)), 1):
        counts = [c + (x is not None) for c, x in zip(counts, (a, b), strict=True)]
        if a is None or b is None:  # one file is longer: count on, to name both lengths
            continue
        bad.report.read += 1
        decoded = [decode_line(a[1]), decode_line(b[1])]
        broken = next((k for k, (text, _) in enumerate(decoded) if text is None), None)
        if broken is not None:
            bad(paths[broken], line_no, INVALID_UTF8, decoded[broken][1])
            continue
        src, tgt = (normalize_whitespace(text or "") for text, _ in decoded)
        if not src or not tgt:
            bad(paths[0] if not src else paths[1], line_no, "empty side")
            continue
        yield src, tgt, lp, line_no
    check_aligned(paths, counts)


def _dataset_rows(ds: Any, label: str, opts: ReadOptions, bad: BadLines, langs: _Langs) -> Iterator[tuple]:
    """``(src, tgt, lang_pair_id, row)`` of a `datasets.Dataset` (`readers.read_hf_dataset`'s rules;
    ``row`` is the 0-based row index)."""
    cols = opts.columns
    per_row = cols.src_lang is not None or cols.tgt_lang is not None
    if cols.tgt_lang is None and opts.tgt_lang is None:
        raise CorpusFormatError(
            label, None, "no target language given", hint="pass --tgt-lang or --tgt-lang-col"
        )
    default = (
        None if per_row else langs.of(validate_lang(opts.src_lang or "en"), validate_lang(opts.tgt_lang))
    )
    row = 0
    for batch in ds.select_columns(cols.names()).iter(batch_size=BATCH_ROWS):
        n = len(batch[cols.src])
        src_langs = batch[cols.src_lang] if cols.src_lang else [opts.src_lang or "en"] * n
        tgt_langs = batch[cols.tgt_lang] if cols.tgt_lang else [opts.tgt_lang] * n
        for src, tgt, sl, tl in zip(batch[cols.src], batch[cols.tgt], src_langs, tgt_langs, strict=True):
            bad.report.read += 1
            odd = next((t for t in (src, tgt) if t is not None and not isinstance(t, str)), None)
            if odd is not None:
                raise CorpusFormatError(label, row, f"text column holds {type(odd).__name__}, not str")
            fields = [src or "", tgt or "", sl, tl] if per_row else [src or "", tgt or ""]
            got = _row(Path(label), row, fields, default, bad, langs)
            row += 1
            if got is not None:
                yield got


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


def _chunk(rows: Sequence[tuple]) -> Chunk:
    """Rows ``(src, tgt, lang_pair_id, line)`` as one chunk of arrays."""
    src, tgt, lp, line = zip(*rows, strict=True) if rows else ((), (), (), ())
    return (
        pa.array(src, pa.string()),
        pa.array(tgt, pa.string()),
        np.asarray(lp, dtype=np.int16),
        np.asarray(line, dtype=np.int64),
    )


def _batched(rows: Iterable[tuple]) -> Iterator[Chunk]:
    """Rows gathered into chunks of `BATCH_ROWS`."""
    batch: list[tuple] = []
    for row in rows:
        batch.append(row)
        if len(batch) == BATCH_ROWS:
            yield _chunk(batch)
            batch = []
    yield _chunk(batch)


def _convert(chunks: Iterable[Chunk], folder: Path, report: ReadReport, langs: _Langs, label: str) -> None:
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
        batches = _record_batches(folder / "pairs.arrow", self.num_rows)
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
        array = np.memmap(path, dtype=dtype, mode="r")
        return array.reshape(-1, width) if width > 1 else array

    def __len__(self) -> int:
        return self.num_rows

    def take(self, rows: np.ndarray) -> list[ParallelPair]:
        """The pairs at ``rows`` (row numbers of the converted corpus), in that order: read straight
        from the mapped record batches (a take over the whole table would gather every batch)."""
        rows = np.asarray(rows, dtype=np.int64)
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
            yield [strings[j] for j in range(len(strings.offsets) - 1)]


def _record_batches(path: Path, rows: int) -> list[pa.RecordBatch]:
    """The record batches of ``pairs.arrow``, memory-mapped; `CacheDamaged` unless they read and hold
    ``rows`` rows of (src, tgt, line)."""
    try:
        reader = pa.ipc.open_file(pa.memory_map(str(path)))
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
    """The converted corpus of a ``--data`` item: a TSV file, ``SRC_FILE,TGT_FILE``, a
    ``save_to_disk`` folder or a Hub dataset id (converted now if its cache is missing or stale)."""
    root = cache / "corpora"
    path = Path(spec)
    if path.is_dir():
        return _open_dataset(load_dataset_split(path, opts.split, flag="--split ")[0], spec, opts, root)
    if path.is_file():
        return _open_files([path], spec, opts, root)
    if "," in spec:
        parts = [Path(p.strip()) for p in spec.split(",")]
        if len(parts) != 2:
            raise ResourceError(f"{spec!r}: expected two files separated by one comma")
        for p in parts:
            if not p.is_file():
                raise ResourceError(f"corpus file not found: {p} (from {spec!r})")
        return _open_files(parts, spec, opts, root)
    if is_hub_id(spec):
        return _open_dataset(_load_hub(spec, opts.split or "train"), spec, opts, root)
    raise ResourceError(
        f"corpus not found: {spec!r}. Give 'bible', a dataset directory, a TSV file, two aligned files "
        "as 'SRC_FILE,TGT_FILE', or a Hub dataset id"
    )


def _open_files(paths: list[Path], label: str, opts: ReadOptions, root: Path) -> ArrowCorpus:
    if len(paths) == 1 and not looks_like_tsv(paths[0]):
        raise CorpusFormatError(
            paths[0],
            None,
            "not a TSV file (no tab on the first line)",
            hint="for one-sentence-per-line files pass 'SRC_FILE,TGT_FILE'",
        )
    key, lines = content_key(paths, opts.key())
    source = ",".join(map(str, paths))

    def make_rows(report: ReadReport, langs: _Langs):
        bad = BadLines(report, opts.skip_bad_lines)
        if len(paths) == 1:
            return _tsv_chunks(paths[0], opts, bad, langs)
        return _batched(_aligned_rows(paths, opts, bad, langs))

    size = sum(p.stat().st_size for p in paths)
    return _cached(root, key, make_rows, label, source, need_bytes(size, lines))


def _open_dataset(ds: Any, label: str, opts: ReadOptions, root: Path) -> ArrowCorpus:
    missing = [c for c in opts.columns.names() if c not in ds.column_names]
    if missing:
        raise CorpusFormatError(
            label,
            None,
            f"no column {missing[0]!r}",
            hint=f"columns are {ds.column_names}; pass --src-col/--tgt-col/--src-lang-col/--tgt-lang-col",
        )
    files = [Path(f["filename"]) for f in ds.cache_files]
    if files:
        key = content_key(files, opts.key())[0]
    else:
        key = xxhash.xxh3_128(f"{ds._fingerprint}{opts.key()}").hexdigest()

    def make_rows(report: ReadReport, langs: _Langs):
        return _batched(_dataset_rows(ds, label, opts, BadLines(report, opts.skip_bad_lines), langs))

    size = sum(f.stat().st_size for f in files)
    return _cached(root, key, make_rows, label, label, need_bytes(size, len(ds)))


def _cached(root: Path, key: str, make_rows, label: str, source: str, need: int) -> ArrowCorpus:
    """The corpus of cache folder ``key``, converted with ``make_rows(report, langs)`` when missing or
    damaged (`babelspace.data.arrow_cache.build`)."""

    def convert(folder: Path) -> None:
        report, langs = ReadReport(source), _Langs()
        _convert(make_rows(report, langs), folder, report, langs, label)

    corpus = build(root, key, convert, lambda folder: ArrowCorpus(folder, label, source), label, need)
    logger.info(corpus.report.summary())
    return corpus


def _load_hub(spec: str, split: str) -> Any:
    """A Hub dataset's split (memory-mapped from the datasets cache); offline and not cached: one line."""
    import datasets

    match = HUB_ID.fullmatch(spec)
    assert match is not None  # is_hub_id said so
    name, subset = match.group(1), match.group(2)
    try:
        return datasets.load_dataset(name, subset, split=split)
    except Exception as exc:  # datasets raises several types for "not there"
        if datasets.config.HF_HUB_OFFLINE:
            raise ResourceError(
                f"--data {spec!r}: Hub dataset {name!r} is not in the local datasets cache and "
                "HF_HUB_OFFLINE=1 forbids downloading it (unset HF_HUB_OFFLINE, or give a local file or folder)"
            ) from None
        raise ResourceError(f"--data {spec!r}: cannot load Hub dataset {name!r}: {exc}") from None
