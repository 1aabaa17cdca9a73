"""Readers for parallel corpora: TSV, aligned line files, Hugging Face datasets, and one dispatcher.

Every reader returns a `ParallelCorpus` and validates as it goes. A bad line raises
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
import random
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from babelspace.data.languages import is_valid_lang, lang_from_suffix, validate_lang
from babelspace.data.lines import BadLines, aligned_rows, first_line, numbered_lines, require_file, rows
from babelspace.data.mined import is_mined_file, read_mined
from babelspace.data.pairs import ParallelCorpus, ParallelPair, ReadReport, normalize_whitespace
from babelspace.data.sources import is_source, load_source
from babelspace.errors import BabelspaceError, CorpusFormatError, ResourceError
from babelspace.writable import write_error

__all__ = ["filter_langs", "load_parallel", "read_aligned", "read_hf_dataset", "read_tsv", "subsample"]

logger = logging.getLogger(__name__)

_TSV_COLUMNS = "columns are src, tgt[, src_lang, tgt_lang] separated by tabs"


def _lang_arg(code: str | None) -> str | None:
    return validate_lang(code) if code is not None else None


def read_tsv(
    path: str | Path,
    src_lang: str | None = None,
    tgt_lang: str | None = None,
    skip_bad_lines: bool = False,
) -> ParallelCorpus:
    """Read ``src<TAB>tgt`` or ``src<TAB>tgt<TAB>src_lang<TAB>tgt_lang`` lines.

    The first non-empty line fixes the column count (2 or 4); every other line must match it. With 2
    columns the languages come from the arguments: ``src_lang`` defaults to ``"en"``, ``tgt_lang``
    must be given. With 4 columns the columns win and the arguments are not used.
    """
    path = Path(path)
    require_file(path)
    arg_src = _lang_arg(src_lang) or "en"
    arg_tgt = _lang_arg(tgt_lang)
    report = ReadReport(str(path))
    bad = BadLines(report, skip_bad_lines)
    pairs: list[ParallelPair] = []
    for lineno, cols in rows(path, bad, (2, 4), hint=_TSV_COLUMNS):
        if len(cols) == 2 and arg_tgt is None:
            raise CorpusFormatError(
                path,
                lineno,
                "2-column TSV without language columns, and no target language was given",
                hint="pass tgt_lang (and src_lang if the source is not English), "
                "or add src_lang and tgt_lang as columns 3 and 4",
            )
        src, tgt = normalize_whitespace(cols[0]), normalize_whitespace(cols[1])
        if not src or not tgt:
            bad(path, lineno, "empty side", "(source)" if not src else "(target)")
            continue
        langs = _row_langs(path, lineno, cols[2:], bad) if len(cols) == 4 else (arg_src, arg_tgt)
        if langs is not None:
            pairs.append(ParallelPair(src, tgt, *langs, f"{path}:{lineno}"))
    return _finish(ParallelCorpus(path.name, pairs, report))


def _row_langs(path: Path, lineno: int, codes: list[str], bad: BadLines) -> tuple[str, str] | None:
    """The row's (src_lang, tgt_lang) from its language columns; None (after `bad`) when one is not
    a language code."""
    codes = [c.strip() for c in codes]
    unknown = [c for c in codes if not is_valid_lang(c)]
    if unknown:
        bad(path, lineno, "unknown language code", repr(unknown[0]))
        return None
    sl, tl = (validate_lang(c) for c in codes)
    return sl, tl


def _finish(corpus: ParallelCorpus) -> ParallelCorpus:
    """Set the report's kept count and log its summary."""
    corpus.report.kept = len(corpus.pairs)
    logger.info(corpus.report.summary())
    return corpus


def read_aligned(
    src_path: str | Path,
    tgt_path: str | Path,
    src_lang: str | None = None,
    tgt_lang: str | None = None,
    skip_bad_lines: bool = False,
) -> ParallelCorpus:
    """Read two line-aligned files (line i of one translates line i of the other).

    Languages come from the arguments, else from the file suffixes (``train.de`` -> ``de``). Trailing
    blank lines are ignored; after that both files must have the same number of lines, else the
    error names the shorter file and the line where it ends (never skipped: it means misalignment).
    """
    paths = [Path(src_path), Path(tgt_path)]
    for p in paths:
        require_file(p)
    sl, tl = file_lang(paths[0], src_lang, "src"), file_lang(paths[1], tgt_lang, "tgt")
    report = ReadReport(",".join(map(str, paths)))
    bad = BadLines(report, skip_bad_lines)
    pairs: list[ParallelPair] = []
    for lineno, texts in aligned_rows(paths, bad):
        src, tgt = (normalize_whitespace(t) for t in texts)
        if not src or not tgt:
            bad(paths[0] if not src else paths[1], lineno, "empty side")
            continue
        pairs.append(ParallelPair(src, tgt, sl, tl, f"{paths[0]}:{lineno}"))
    return _finish(ParallelCorpus(",".join(p.name for p in paths), pairs, report))


def file_lang(path: Path, code: str | None, side: str) -> str:
    """The language of one side: the ``{side}_lang`` argument, else the file's suffix."""
    lang = _lang_arg(code) or lang_from_suffix(path)
    if lang is None:
        raise CorpusFormatError(
            path,
            None,
            "cannot tell the language of this file",
            hint=f"pass {side}_lang, or name the file with a language suffix such as '.de'",
        )
    return lang


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
    Languages come from the per-row columns ``src_lang_col``/``tgt_lang_col`` when given, else from
    the arguments (``src_lang`` defaults to ``"en"``, ``tgt_lang`` is required). Here the number in
    ``path:N`` (errors and ``origin``) is the 0-based row index, as in ``dataset[N]``.
    """
    path = Path(path)
    ds, split = load_dataset_split(path, split)
    columns = [src_col, tgt_col, src_lang_col, tgt_lang_col]
    missing = [c for c in columns if c is not None and c not in ds.column_names]
    if missing:
        raise CorpusFormatError(
            path,
            None,
            f"no column {missing[0]!r}",
            hint=f"columns are {ds.column_names}; pass src_col=/tgt_col=/src_lang_col=/tgt_lang_col=",
        )
    arg_src = _lang_arg(src_lang) or "en"
    arg_tgt = _lang_arg(tgt_lang)
    if tgt_lang_col is None and arg_tgt is None:
        raise CorpusFormatError(
            path, None, "no target language given", hint="pass tgt_lang=... or tgt_lang_col=..."
        )
    report = ReadReport(str(path) + (f"[{split}]" if split else ""))
    bad = BadLines(report, skip_bad_lines)
    pairs: list[ParallelPair] = []
    for row, (src, tgt, sl, tl) in _dataset_rows(ds, columns, (arg_src, arg_tgt)):
        report.read += 1
        odd = next((text for text in (src, tgt) if not isinstance(text, str)), None)
        if odd is not None:  # a missing text (None) is an empty side, anything else is an error
            raise CorpusFormatError(path, row, f"text column holds {type(odd).__name__}, not str")
        src = normalize_whitespace(src) if isinstance(src, str) else ""
        tgt = normalize_whitespace(tgt) if isinstance(tgt, str) else ""
        if not src or not tgt:
            bad(path, row, "empty side", "(source)" if not src else "(target)")
            continue
        unknown = [c for c in (sl, tl) if not isinstance(c, str) or not is_valid_lang(c)]
        if unknown:
            bad(path, row, "unknown language code", repr(unknown[0]))
            continue
        pairs.append(ParallelPair(src, tgt, validate_lang(sl), validate_lang(tl), f"{path}:{row}"))
    return _finish(ParallelCorpus(path.name, pairs, report))


def load_dataset_split(path: Path, split: str | None, flag: str = "split=") -> tuple[Any, str | None]:
    """The `Dataset` saved in ``path`` (for a `DatasetDict`, its ``split``: unset, its only split,
    else ``train``) and the split used; a missing split names ``flag`` (how the caller's user
    chooses one: ``split=`` in Python, ``--split `` on the command line)."""
    import datasets  # slow to import: only when needed

    if not path.is_dir():
        raise ResourceError(f"dataset directory not found: {path}")
    try:
        ds = datasets.load_from_disk(str(path))
    except FileNotFoundError as exc:
        raise CorpusFormatError(
            path,
            None,
            "not a Hugging Face dataset directory",
            hint="write one with Dataset.save_to_disk(path)",
        ) from exc
    if not isinstance(ds, datasets.DatasetDict):
        if split is not None:
            logger.debug("%s is a single Dataset; split %r not used", path, split)
        return ds, split
    names = list(ds.keys())
    if split is None:
        split = names[0] if len(names) == 1 else "train"
    if split not in ds:
        raise CorpusFormatError(
            path, None, f"no split {split!r}", hint=f"splits are {', '.join(names)}; pass {flag}NAME"
        )
    return ds[split], split


_HF_BATCH_ROWS = 4096  # rows fetched from Arrow per batch: a few MB of text, far fewer Python calls


def _dataset_rows(
    ds: Any, columns: list[str | None], default_langs: tuple[str, str | None]
) -> Iterator[tuple[int, tuple[object, object, object, object]]]:
    """``(row, (src, tgt, src_lang, tgt_lang))`` for every row, as stored (not yet validated); a
    language column that is None takes its value from ``default_langs``."""
    wanted = [c for c in columns if c is not None]
    ds = ds.select_columns(wanted)
    for start in range(0, len(ds), _HF_BATCH_ROWS):
        batch = ds[start : start + _HF_BATCH_ROWS]
        for j in range(len(batch[wanted[0]])):
            src, tgt = (batch[c][j] for c in columns[:2])
            langs = (batch[c][j] if c else d for c, d in zip(columns[2:], default_langs, strict=True))
            yield start + j, (src, tgt, *langs)


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
    groups: dict[tuple[str, str], list[int]] = defaultdict(list)
    for i, p in enumerate(corpus.pairs):
        groups[(p.src_lang, p.tgt_lang)].append(i)
    keys = sorted(groups)
    exact = {k: len(groups[k]) * max_pairs / n for k in keys}
    quota = {k: int(exact[k]) for k in keys}
    leftover = max_pairs - sum(quota.values())
    for k in sorted(keys, key=lambda k: (-(exact[k] - quota[k]), k))[:leftover]:
        quota[k] += 1
    rng = random.Random(seed)
    chosen: list[int] = []
    for k in keys:
        chosen.extend(rng.sample(groups[k], quota[k]))
    chosen.sort()
    report = corpus.report.copy()
    report.skipped["over max_pairs"] = report.skipped.get("over max_pairs", 0) + n - len(chosen)
    report.kept = len(chosen)
    return ParallelCorpus(corpus.name, [corpus.pairs[i] for i in chosen], report)


def looks_like_tsv(path: Path) -> bool:
    if path.suffix.lower() == ".tsv":
        return True
    raw = first_line(path)
    return raw is not None and b"\t" in raw


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
      a DatasetDict) with columns ``src`` and ``tgt``;
    - ``"A,B"``: two existing line-aligned files;
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
    """The corpus a path spec names: a dataset directory, ``babelspace mine`` output, a TSV file or
    ``"SRC_FILE,TGT_FILE"``."""
    path = Path(spec)
    langs = {"src_lang": src_lang, "tgt_lang": tgt_lang, "skip_bad_lines": skip_bad_lines}
    if path.is_dir():
        return read_hf_dataset(path, split=split, **langs)
    if path.is_file() and is_mined_file(path):
        return read_mined(path, min_score=min_score, **langs)
    if path.is_file():
        if not looks_like_tsv(path):
            raise CorpusFormatError(
                path,
                None,
                "not a TSV file (no tab on the first line)",
                hint="for one-sentence-per-line files pass 'SRC_FILE,TGT_FILE'",
            )
        return read_tsv(path, **langs)
    if "," in spec:
        parts = [Path(p.strip()) for p in spec.split(",")]
        if len(parts) != 2:
            raise ResourceError(f"{spec!r}: expected two files separated by one comma")
        for p in parts:
            if not p.is_file():
                raise ResourceError(f"corpus file not found: {p} (from {spec!r})")
        return read_aligned(*parts, **langs)
    raise ResourceError(
        f"corpus not found: {spec!r}. Give 'bible', a dataset directory, a TSV file, "
        "or two aligned files as 'SRC_FILE,TGT_FILE'"
    )


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


def check_output_file(path: str | Path, flag: str) -> None:
    """Refuse, before any work, an output file path that cannot be written: a folder, a path under
    a regular file, or a read-only place."""
    path = Path(path)
    if path.is_dir():
        raise BabelspaceError(f"{flag} {path} is a folder; give a file path")
    if path.exists():
        try:
            with open(path, "ab"):  # appends nothing: the file is unchanged
                pass
        except OSError as exc:
            raise BabelspaceError(f"{flag} {path} is not writable ({exc.strerror})") from None
        return
    _check_writable_parent(path, flag)


def check_output_folder(path: str | Path, flag: str) -> None:
    """Refuse, before any work, an output folder that cannot be written: a file, a path under a
    regular file, or a read-only place."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise BabelspaceError(f"{flag} {path} is a file; give a folder path")
    _check_writable_parent(path / "x", flag, shown=path)


def _check_writable_parent(path: Path, flag: str, shown: Path | None = None) -> None:
    """The nearest existing folder above ``path`` must be a folder that accepts a new file."""
    shown = shown or path
    for parent in path.parents:
        if parent.exists():
            if not parent.is_dir():
                raise BabelspaceError(f"{flag} {shown}: {parent} is a file, not a folder")
            exc = write_error(parent)
            if exc is not None:
                raise BabelspaceError(
                    f"{flag} {shown} is not writable: {parent} does not accept new files ({exc.strerror})"
                ) from None
            break
