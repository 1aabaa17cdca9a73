"""Readers for parallel corpora: TSV, aligned line files, Hugging Face datasets, JSON Lines/JSON, CSV
and Parquet files, and one dispatcher (`load_parallel`), all in memory (evaluation, ``score``).

Each reader turns the rows of its format's one row reader into `ParallelPair` objects: the same
readers the Arrow cache of training converts with (`babelspace.data.text_rows`,
`babelspace.data.dataset_rows`, `babelspace.data.data_files`), so parsing and messages are one code
path. Every reader returns a `ParallelCorpus` and validates as it goes. A bad line raises
`CorpusFormatError` naming the file and the 1-based line (``path:line: reason``); with
``skip_bad_lines=True`` it is skipped instead, counted in ``corpus.report.skipped`` under its reason
and the first few are logged. The reasons are:

- ``"wrong column count"``: a TSV line without the 2 or 4 tab-separated columns of the first line
  (a blank line in the middle of a TSV file is one of these; blank lines at the very end are fine),
- ``"empty side"``: source or target is empty after whitespace normalisation,
- ``"invalid utf-8"``: the line's bytes do not decode as UTF-8 (files are decoded line by line),
- ``"unknown language code"``: a language column holds something that is not a language code.

Texts are whitespace-normalised (`normalize_whitespace`). Misaligned files (different line counts)
always raise: that is not one bad line but a broken corpus.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from babelspace.data.apportionment import stratified_sample
from babelspace.data.corpus_rows import Chunk, LangPairIds, Row, batched, pairs_of
from babelspace.data.data_files import data_file_rows, data_files
from babelspace.data.dataset_rows import CorpusColumns, dataset_rows, load_dataset_split, resolve_columns
from babelspace.data.formats import corpus_format
from babelspace.data.languages import validate_lang
from babelspace.data.lines import BadLines, numbered_lines, require_file
from babelspace.data.mined import read_mined
from babelspace.data.mix import UnknownCorpus, parse_corpus
from babelspace.data.pairs import ParallelCorpus, ReadReport
from babelspace.data.sources import is_source, load_source
from babelspace.data.text_rows import aligned_file_rows, tsv_chunks
from babelspace.errors import ResourceError

__all__ = [
    "filter_langs",
    "load_parallel",
    "read_aligned",
    "read_data_files",
    "read_hf_dataset",
    "read_tsv",
    "subsample",
]

logger = logging.getLogger(__name__)

#: Rows gathered per chunk when a reader turns them into pairs.
_CHUNK_ROWS = 65536


def _read(source: str, name: str, label: str, skip_bad_lines: bool, chunks: Any) -> ParallelCorpus:
    """The corpus of ``chunks(bad, langs)`` (a shared row reader), its report's kept count set and logged."""
    report = ReadReport(source)
    langs = LangPairIds()
    pairs = pairs_of(chunks(BadLines(report, skip_bad_lines), langs), langs, label)
    report.kept = len(pairs)
    logger.info(report.summary())
    return ParallelCorpus(name, pairs, report)


def _chunked(rows: Iterator[Row]) -> Iterator[Chunk]:
    return batched(rows, _CHUNK_ROWS)


def read_tsv(
    path: str | Path,
    src_lang: str | None = None,
    tgt_lang: str | None = None,
    skip_bad_lines: bool = False,
) -> ParallelCorpus:
    """Read ``src<TAB>tgt`` or ``src<TAB>tgt<TAB>src_lang<TAB>tgt_lang`` lines
    (`babelspace.data.text_rows.tsv_chunks`, the reader training's Arrow cache uses too).

    The first non-empty line fixes the column count (2 or 4); every other line must match it. With 2
    columns the languages come from the arguments: ``src_lang`` defaults to ``"en"``, ``tgt_lang``
    must be given. With 4 columns the columns win and the arguments are not used.
    """
    path = Path(path)
    require_file(path)
    if src_lang is not None:
        validate_lang(src_lang)

    def chunks(bad: BadLines, langs: LangPairIds) -> Iterator[Chunk]:
        return tsv_chunks(path, src_lang, tgt_lang, bad, langs)

    return _read(str(path), path.name, str(path), skip_bad_lines, chunks)


def read_aligned(
    src_path: str | Path,
    tgt_path: str | Path,
    src_lang: str | None = None,
    tgt_lang: str | None = None,
    skip_bad_lines: bool = False,
) -> ParallelCorpus:
    """Read two line-aligned files (line i of one translates line i of the other;
    `babelspace.data.text_rows.aligned_file_rows`).

    Languages come from the arguments, else from the file suffixes (``train.de`` -> ``de``). Trailing
    blank lines are ignored; after that both files must have the same number of lines, else the
    error names the shorter file and the line where it ends (never skipped: it means misalignment).
    """
    paths = [Path(src_path), Path(tgt_path)]
    for p in paths:
        require_file(p)

    def chunks(bad: BadLines, langs: LangPairIds) -> Iterator[Chunk]:
        return _chunked(aligned_file_rows(paths, src_lang, tgt_lang, bad, langs))

    name = ",".join(p.name for p in paths)
    return _read(",".join(map(str, paths)), name, str(paths[0]), skip_bad_lines, chunks)


def read_hf_dataset(
    path: str | Path,
    src_col: str = "src",
    tgt_col: str = "tgt",
    src_lang_col: str | None = None,
    tgt_lang_col: str | None = None,
    src_lang: str | None = None,
    tgt_lang: str | None = None,
    split: str | None = None,
    skip_bad_lines: bool = False,
) -> ParallelCorpus:
    """Read a directory written by ``Dataset.save_to_disk`` or ``DatasetDict.save_to_disk``.

    The Arrow files are memory-mapped (``datasets.load_from_disk``). For a `DatasetDict`, ``split``
    picks the split (default: the only one, else ``"train"``); for a plain `Dataset` it is ignored.
    Columns and languages as `babelspace.data.dataset_rows` reads them (sentence-transformers'
    ``english``/``non_english`` accepted as they are; ``src_lang`` defaults to ``"en"``). Here the
    number in ``path:N`` (errors and ``origin``) is the 0-based row index, as in ``dataset[N]``.
    """
    path = Path(path)
    ds, split = load_dataset_split(path, split)
    cols = CorpusColumns(src_col, tgt_col, src_lang_col, tgt_lang_col)
    source = str(path) + (f"[{split}]" if split else "")
    return _read_dataset(ds, str(path), source, path.name, cols, (src_lang, tgt_lang), skip_bad_lines)


def _read_dataset(
    ds: Any,
    label: str,
    source: str,
    name: str,
    cols: CorpusColumns,
    langs_given: tuple[str | None, str | None],
    skip_bad_lines: bool,
) -> ParallelCorpus:
    cols = resolve_columns(ds.column_names, cols, label)
    batches = ds.select_columns(cols.names()).iter(batch_size=_HF_BATCH_ROWS)

    def chunks(bad: BadLines, langs: LangPairIds) -> Iterator[Chunk]:
        return _chunked(dataset_rows(batches, label, cols, langs_given, bad, langs))

    return _read(source, name, label, skip_bad_lines, chunks)


def read_data_files(
    path: str | Path,
    cols: CorpusColumns | None = None,
    src_lang: str | None = None,
    tgt_lang: str | None = None,
    split: str | None = None,
    skip_bad_lines: bool = False,
) -> ParallelCorpus:
    """Read a JSON Lines/JSON, CSV or Parquet file, or a folder of them (``split`` picks a folder's
    split), through ``datasets`` (`babelspace.data.data_files`: the reader training uses too).
    ``path:N`` is the N-th record (1-based) of the file."""
    path = Path(path)
    fmt, files = data_files(path, split, flag="split=")

    def chunks(bad: BadLines, langs: LangPairIds) -> Iterator[Chunk]:
        columns = cols or CorpusColumns()
        return _chunked(data_file_rows(fmt, files, columns, (src_lang, tgt_lang), bad, langs))

    return _read(str(path), path.name, str(path), skip_bad_lines, chunks)


_HF_BATCH_ROWS = 4096  # rows fetched from Arrow per batch: a few MB of text, far fewer Python calls


def filter_langs(corpus: ParallelCorpus, langs: Iterable[str]) -> ParallelCorpus:
    """Keep the pairs whose non-English side(s) are all in ``langs`` (English-English pairs are kept).

    Dropped pairs are counted as ``"language not requested"`` in the new corpus's report.
    """
    wanted = {validate_lang(code) for code in langs}
    report = corpus.report.copy()
    kept = [p for p in corpus.pairs if {p.src_lang, p.tgt_lang} - {"en"} <= wanted]
    if len(kept) < len(corpus):
        report.skipped["language not requested"] = (
            report.skipped.get("language not requested", 0) + len(corpus) - len(kept)
        )
    report.kept = len(kept)
    return ParallelCorpus(corpus.name, kept, report)


def subsample(corpus: ParallelCorpus, max_pairs: int, seed: int = 0) -> ParallelCorpus:
    """A seeded random subset of at most ``max_pairs`` pairs, stratified by language pair.

    Each (src_lang, tgt_lang) group keeps a share proportional to its size (largest remainder, so
    the shares sum to exactly ``max_pairs``); pairs keep their original order. Dropped pairs are
    counted as ``"over max_pairs"``.
    """
    if max_pairs < 0:
        raise ValueError(f"max_pairs must be >= 0, got {max_pairs}")
    n = len(corpus)
    if n <= max_pairs:
        return corpus
    index = {k: g for g, k in enumerate(sorted({(p.src_lang, p.tgt_lang) for p in corpus.pairs}))}
    codes = np.fromiter((index[(p.src_lang, p.tgt_lang)] for p in corpus.pairs), dtype=np.int64, count=n)
    chosen = stratified_sample(codes, len(index), max_pairs, seed).tolist()
    report = corpus.report.copy()
    report.skipped["over max_pairs"] = report.skipped.get("over max_pairs", 0) + n - len(chosen)
    report.kept = len(chosen)
    return ParallelCorpus(corpus.name, [corpus.pairs[i] for i in chosen], report)


def load_parallel(
    spec: str,
    *,
    langs: Sequence[str] | None = None,
    split: str = "train",
    skip_bad_lines: bool = False,
    src_lang: str | None = None,
    tgt_lang: str | None = None,
    max_pairs: int | None = None,
    seed: int = 0,
    min_score: float | None = None,
) -> ParallelCorpus:
    """Load a parallel corpus from a spec string.

    ``spec`` is one of:

    - ``"bible"``: the offline verse-aligned Bible (English -> each of ``langs``, default all) for
      ``split`` (``train``/``dev``/``test``, split by whole books);
    - a source of `babelspace.data.sources` (``cldr``, ``mono-en:fortunes``, ``mono-en:pydoc``,
      ``mono-en:pymsg``, ``mono-en:wordnet``) for ``split``, held-out text never in ``train``;
    - a directory: a Hugging Face dataset saved with ``save_to_disk`` (``split`` picks the split of
      a DatasetDict) with columns ``src`` and ``tgt`` (or ``english``/``non_english``), or a folder
      of JSON Lines/JSON, CSV or Parquet files;
    - a ``.jsonl``/``.json``, ``.csv`` or ``.parquet`` file (`read_data_files`);
    - ``"aligned:SRC_FILE+TGT_FILE"``: two existing line-aligned files;
    - ``babelspace mine`` output (a file whose first line has 3 or 5 tab-separated columns):
      `babelspace.data.mined.read_mined`, languages from its summary, pairs scoring below
      ``min_score`` dropped;
    - a ``.tsv`` file, or any file whose first non-empty line has a tab: TSV.

    ``langs`` keeps only pairs whose non-English side is in ``langs``. ``max_pairs`` then keeps a
    seeded random subset stratified by language pair (see `subsample`).
    """
    if spec == "bible":
        from babelspace.data.bible import bible_pairs

        corpus = bible_pairs(langs=langs, split=split)
    elif is_source(spec):
        corpus = load_source(spec, langs=langs, split=split)
    else:
        corpus = _read_path_spec(spec, split, skip_bad_lines, src_lang, tgt_lang, min_score)
        if langs is not None:
            corpus = filter_langs(corpus, langs)
    if max_pairs is not None:
        corpus = subsample(corpus, max_pairs, seed=seed)
    logger.info("loaded %s: %d pairs %s", corpus.name, len(corpus), corpus.lang_pairs())
    return corpus


def _read_path_spec(
    spec: str,
    split: str,
    skip_bad_lines: bool,
    src_lang: str | None,
    tgt_lang: str | None,
    min_score: float | None = None,
) -> ParallelCorpus:
    """The corpus a spec names (`babelspace.data.mix.parse_corpus`: the one ``--data`` parser): a
    dataset folder, a folder of data files, a JSON/CSV/Parquet file, ``babelspace mine`` output, a
    TSV file or ``aligned:SRC_FILE+TGT_FILE``."""
    try:
        item = parse_corpus(spec)
    except UnknownCorpus:
        raise ResourceError(
            f"corpus not found: {spec!r}. Give 'bible', a TSV, JSON Lines, CSV or Parquet file, a dataset "
            "folder, or two line-aligned files as 'aligned:SRC_FILE+TGT_FILE'"
        ) from None
    langs = {"src_lang": src_lang, "tgt_lang": tgt_lang, "skip_bad_lines": skip_bad_lines}
    if item.aligned is not None:
        return read_aligned(*item.aligned, **langs)
    path = Path(item.name)
    if not path.exists():  # parse_corpus took it for a Hub dataset id
        raise ResourceError(
            f"corpus not found: {spec!r} (a Hub dataset id is read by 'babelspace train --data'; "
            "to read it here, save it with Dataset.save_to_disk and give the folder)"
        )
    kind = corpus_format(path)
    if kind == "dataset":
        return read_hf_dataset(path, split=split, **langs)
    if kind == "mined":
        return read_mined(path, min_score=min_score, **langs)
    if kind == "tsv":
        return read_tsv(path, **langs)
    return read_data_files(path, split=split, **langs)


def read_text_lines(path: str | Path) -> tuple[list[str], int]:
    """One sentence per line of a UTF-8 file (line endings stripped; blank lines kept, also at the
    end), and how many lines are blank. A missing file is a `ResourceError`, invalid UTF-8 a
    `CorpusFormatError` naming the file and line."""
    path = Path(path)
    require_file(path)
    bad = BadLines(ReadReport(str(path)), skip_bad_lines=False)
    # every trailing carriage return goes (the core drops only the one of a CRLF ending)
    texts = [text.rstrip("\r") for _, text in numbered_lines(path, bad, keep_blank_tail=True)]
    return texts, sum(not t.strip() for t in texts)
