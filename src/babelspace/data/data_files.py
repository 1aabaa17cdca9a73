"""JSON Lines/JSON, CSV and Parquet corpora, read by ``datasets.load_dataset`` as a stream.

A ``--data`` item (or an evaluation pair file) ending in ``.jsonl``, ``.json``, ``.csv`` or
``.parquet``, or a folder of such files, is read with ``datasets.load_dataset("json"|"csv"|
"parquet", data_files=FILE, streaming=True)``: record batches go straight into the caller's rows
(`babelspace.data.dataset_rows`: the same columns and row rules as dataset folders), never all rows as
Python objects, and nothing is written to the datasets cache. A folder's files are found and split as
``datasets`` does for a local folder (``train-*.parquet``, ``dev/``...: `data_files`); ``--split``
picks one (unset: the only split, else ``train``; a folder whose file names name no split is one
table, whatever ``--split`` says); one folder holds one format.

Row numbers (``FILE:N`` in errors) are 1-based records of the file: in a JSON Lines file, its line
(``datasets`` refuses blank lines in the middle); in a CSV file, the N-th record after the header. CSV
fields are read as text (``2019`` stays ``"2019"``; an empty field is an empty side). A file that
``datasets`` cannot parse (a JSON syntax error, a CSV record with too many fields) is one error naming
the file, with or without ``--skip-bad-lines``.
"""

from __future__ import annotations

import csv
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from babelspace.data.corpus_rows import LangPairIds, Row
from babelspace.data.dataset_rows import CorpusColumns, dataset_rows, resolve_columns
from babelspace.data.lines import BadLines, first_line
from babelspace.errors import CorpusFormatError, first_error_line

__all__ = [
    "FILE_FORMATS",
    "data_file_format",
    "data_file_rows",
    "data_files",
    "folder_split",
    "size_and_rows",
]

logger = logging.getLogger(__name__)

#: File suffixes read through ``datasets``, and the builder that reads them.
FILE_FORMATS = {".jsonl": "json", ".json": "json", ".csv": "csv", ".parquet": "parquet"}
_NOT_A_CORPUS_FOLDER = (
    "neither a Dataset.save_to_disk folder nor a folder of .jsonl/.json/.csv/.parquet files "
    "(it holds {kinds})"
)
#: Records per batch taken from ``datasets``.
BATCH_RECORDS = 8192


def data_file_format(path: Path) -> str | None:
    """``json``, ``csv`` or ``parquet`` for a file of that suffix, else None."""
    return FILE_FORMATS.get(path.suffix.lower())


def data_files(path: Path, split: str | None, flag: str = "--split ") -> tuple[str, list[Path]]:
    """The format and the files of a data file, or of a folder's ``split`` (split and file names as
    ``datasets`` resolves them for a local folder)."""
    fmt = data_file_format(path)
    if path.is_file() and fmt is not None:
        return fmt, [path]
    from datasets.data_files import DEFAULT_PATTERNS_ALL, DataFilesDict, EmptyDatasetError, get_data_patterns

    try:
        patterns = get_data_patterns(str(path))
        splits = DataFilesDict.from_patterns(patterns, base_path=str(path))
    except EmptyDatasetError:
        raise CorpusFormatError(path, None, _NOT_A_CORPUS_FOLDER.format(kinds="no data file")) from None
    names = [str(s) for s in splits]
    chosen = _chosen_split(names, split, patterns == DEFAULT_PATTERNS_ALL)
    if chosen not in names:
        hint = f"splits are {', '.join(names)}; pass {flag}NAME"
        raise CorpusFormatError(path, None, f"no split {chosen!r} among its files", hint=hint)
    files = sorted(Path(f) for f in splits[chosen])
    _warn_unsplit(path, {Path(f) for files_ in splits.values() for f in files_})
    formats = {data_file_format(f) for f in files}
    kinds = ", ".join(sorted({f.suffix or f.name for f in files}))
    if formats == {None}:
        raise CorpusFormatError(path, None, _NOT_A_CORPUS_FOLDER.format(kinds=f"{kinds} files"))
    if len(formats) != 1:
        hint = "a folder holds files of one kind: .jsonl/.json, .csv or .parquet"
        raise CorpusFormatError(
            path, None, f"split {chosen!r} mixes files of several kinds ({kinds})", hint=hint
        )
    return formats.pop() or "", files


def _chosen_split(names: list[str], split: str | None, unnamed: bool) -> str:
    """``split`` when given (and some file names a split: else the one table), else the only split,
    else ``train``: the rule ``train --data`` reads a folder by."""
    return split if split is not None and not unnamed else (names[0] if len(names) == 1 else "train")


def folder_split(path: Path, split: str | None) -> str | None:
    """The split :func:`data_files` reads of a folder for ``split`` (None: a file, or a folder whose
    file names name no split)."""
    if not path.is_dir():
        return None
    from datasets.data_files import DEFAULT_PATTERNS_ALL, DataFilesDict, EmptyDatasetError, get_data_patterns

    try:
        patterns = get_data_patterns(str(path))
        names = [str(s) for s in DataFilesDict.from_patterns(patterns, base_path=str(path))]
    except EmptyDatasetError:
        return None
    if patterns == DEFAULT_PATTERNS_ALL:
        return None
    return _chosen_split(names, split, False)


def _warn_unsplit(folder: Path, in_splits: set[Path]) -> None:
    """Say which data files of ``folder`` no split names (``datasets`` leaves them out)."""
    left = sorted(
        f for f in folder.rglob("*") if f.is_file() and data_file_format(f) and f.resolve() not in in_splits
    )
    if left:
        names = ", ".join(str(f.relative_to(folder)) for f in left[:5]) + (", ..." if len(left) > 5 else "")
        logger.warning("%s: %d data files are in no split and are not read (%s)", folder, len(left), names)


def size_and_rows(fmt: str, files: list[Path], lines: int) -> tuple[int, int]:
    """(text bytes, rows) bounds for the disk estimate: a Parquet file's uncompressed size and row
    count from its footer; a text file's size and ``lines``."""
    if fmt != "parquet":
        return sum(f.stat().st_size for f in files), lines
    import pyarrow.parquet as pq

    size = rows = 0
    for f in files:
        meta = pq.ParquetFile(f).metadata
        size += sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups))
        rows += meta.num_rows
    return size, rows


def data_file_rows(
    fmt: str,
    files: list[Path],
    cols: CorpusColumns,
    langs_given: tuple[str | None, str | None],
    bad: BadLines,
    langs: LangPairIds,
) -> Iterator[Row]:
    """The good rows of ``files``, file after file; errors name the file and its record. Several
    files number their rows on across files (each row's number is unique in the corpus)."""
    offset = 0
    for path in files:
        before = bad.report.read
        opened = _open(fmt, path)
        if opened is None:
            continue
        ds, found = opened
        resolved = resolve_columns(found, cols, path)
        stream = _guarded(path, fmt, ds.select_columns(resolved.names()).iter(batch_size=BATCH_RECORDS))
        for src, tgt, lp, no in dataset_rows(stream, path, resolved, langs_given, bad, langs, first_row=1):
            yield src, tgt, lp, offset + no
        offset += bad.report.read - before


def _open(fmt: str, path: Path) -> tuple[Any, list[str]] | None:
    """(the file as a streamed dataset, its columns), or None for a text file without a record."""
    if fmt != "parquet" and first_line(path) is None:
        return None
    import datasets

    options: dict[str, Any] = {}
    if fmt == "csv":  # every field as text: no number inference, an empty field is ""
        header = _csv_header(path)
        options = {"features": datasets.Features({c: datasets.Value("string") for c in header})}
        options["keep_default_na"] = False
    try:
        ds = datasets.load_dataset(fmt, data_files=[str(path)], split="train", streaming=True, **options)
        found = list(ds.column_names or [])
        if not found:
            found = list(next(iter(ds.iter(batch_size=1)), {}))
    except Exception as exc:  # datasets raises many types for an unreadable file
        raise _unreadable(path, fmt, exc) from None
    return ds, found


def _guarded(path: Path, fmt: str, it: Any) -> Iterator[dict[str, list[Any]]]:
    """``it``'s batches; a parse error of ``datasets`` becomes one line naming the file."""
    it = iter(it)
    while True:
        try:
            batch = next(it)
        except StopIteration:
            return
        except Exception as exc:
            raise _unreadable(path, fmt, exc) from None
        yield batch


def _unreadable(path: Path, fmt: str, exc: Exception) -> CorpusFormatError:
    what = first_error_line(exc)
    hint = "JSON Lines: one object per line, no blank lines" if fmt == "json" else None
    return CorpusFormatError(path, None, f"datasets cannot read it as {fmt.upper()} ({what})", hint=hint)


def _csv_header(path: Path) -> list[str]:
    """The column names of a CSV file's first record."""
    with path.open(encoding="utf-8-sig", newline="", errors="replace") as f:
        return next(csv.reader(f), [])
