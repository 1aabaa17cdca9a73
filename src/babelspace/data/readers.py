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
from collections.abc import Iterable, Sequence
from pathlib import Path

from babelspace.data.languages import is_valid_lang, lang_from_suffix, validate_lang
from babelspace.data.pairs import ParallelCorpus, ParallelPair, ReadReport, normalize_whitespace
from babelspace.data.sources import is_source, load_source
from babelspace.errors import BabelspaceError, CorpusFormatError, ResourceError

__all__ = ["filter_langs", "load_parallel", "read_aligned", "read_hf_dataset", "read_tsv", "subsample"]

logger = logging.getLogger(__name__)

_UTF8_BOM = b"\xef\xbb\xbf"


class _Checker:
    """Raise-or-skip for one file, so every reader handles bad lines the same way."""

    def __init__(self, report: ReadReport, skip_bad_lines: bool) -> None:
        self.report = report
        self.skip = skip_bad_lines

    def bad(
        self, path: Path | str, line: int, reason: str, detail: str = "", hint: str | None = None
    ) -> None:
        if not self.skip:
            raise CorpusFormatError(path, line, f"{reason} {detail}".strip(), hint=hint)
        self.report.add_skip(reason, f"{path}:{line}" + (f" {detail}" if detail else ""))


def _require_file(path: Path) -> None:
    if not path.exists():
        raise ResourceError(f"corpus file not found: {path}")
    if not path.is_file():
        raise ResourceError(f"not a file: {path}")


def _read_lines(path: Path) -> list[bytes]:
    """The file's lines as bytes, line endings removed, trailing blank lines dropped."""
    data = path.read_bytes()
    if data.startswith(_UTF8_BOM):
        data = data[len(_UTF8_BOM) :]
    lines = data.split(b"\n")
    lines = [ln[:-1] if ln.endswith(b"\r") else ln for ln in lines]
    while lines and not lines[-1].strip():
        lines.pop()
    return lines


def _decode(raw: bytes) -> tuple[str | None, str]:
    """(text, "") or (None, detail) when the bytes are not UTF-8."""
    try:
        return raw.decode("utf-8"), ""
    except UnicodeDecodeError as exc:
        return None, f"(bad byte 0x{raw[exc.start]:02x} at byte offset {exc.start})"


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
    _require_file(path)
    arg_src = _lang_arg(src_lang) or "en"
    arg_tgt = _lang_arg(tgt_lang)
    report = ReadReport(str(path))
    check = _Checker(report, skip_bad_lines)
    ncols: int | None = None
    first_line = 0
    pairs: list[ParallelPair] = []
    for lineno, raw in enumerate(_read_lines(path), 1):
        report.read += 1
        text, detail = _decode(raw)
        if text is None:
            check.bad(path, lineno, "invalid utf-8", detail)
            continue
        cols = text.split("\t")
        if ncols is None and len(cols) in (2, 4):
            ncols, first_line = len(cols), lineno
            if ncols == 2 and arg_tgt is None:
                raise CorpusFormatError(
                    path,
                    lineno,
                    "2-column TSV without language columns, and no target language was given",
                    hint="pass tgt_lang (and src_lang if the source is not English), "
                    "or add src_lang and tgt_lang as columns 3 and 4",
                )
        if len(cols) != ncols:
            expected = f"expected {ncols} as on line {first_line}" if ncols else "expected 2 or 4"
            check.bad(
                path,
                lineno,
                "wrong column count",
                f"({len(cols)} tab-separated columns; {expected})",
                hint="columns are src, tgt[, src_lang, tgt_lang] separated by tabs",
            )
            continue
        src, tgt = normalize_whitespace(cols[0]), normalize_whitespace(cols[1])
        if not src or not tgt:
            check.bad(path, lineno, "empty side", "(source)" if not src else "(target)")
            continue
        if ncols == 4:
            codes = [c.strip() for c in cols[2:]]
            unknown = [c for c in codes if not is_valid_lang(c)]
            if unknown:
                check.bad(path, lineno, "unknown language code", repr(unknown[0]))
                continue
            sl, tl = (validate_lang(c) for c in codes)
        else:
            sl, tl = arg_src, arg_tgt
        pairs.append(ParallelPair(src, tgt, sl, tl, f"{path}:{lineno}"))
    report.kept = len(pairs)
    logger.info(report.summary())
    return ParallelCorpus(path.name, pairs, report)


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
    src_path, tgt_path = Path(src_path), Path(tgt_path)
    for p in (src_path, tgt_path):
        _require_file(p)
    langs: list[str] = []
    for p, arg, side in ((src_path, src_lang, "src"), (tgt_path, tgt_lang, "tgt")):
        code = _lang_arg(arg) or lang_from_suffix(p)
        if code is None:
            raise CorpusFormatError(
                p,
                None,
                "cannot tell the language of this file",
                hint=f"pass {side}_lang, or name the file with a language suffix such as '.de'",
            )
        langs.append(code)
    sl, tl = langs
    src_lines, tgt_lines = _read_lines(src_path), _read_lines(tgt_path)
    if len(src_lines) != len(tgt_lines):
        (short, n_short), (long_, n_long) = sorted(
            ((src_path, len(src_lines)), (tgt_path, len(tgt_lines))), key=lambda x: x[1]
        )
        raise CorpusFormatError(
            short,
            n_short or None,  # an empty file has no line 0 to point at
            f"file ends here after {n_short} lines, but {long_} has {n_long}"
            if n_short
            else f"file is empty, but {long_} has {n_long} lines",
            hint="the two files must be line-aligned; check for a missing or extra line",
        )
    report = ReadReport(f"{src_path},{tgt_path}")
    check = _Checker(report, skip_bad_lines)
    pairs: list[ParallelPair] = []
    for lineno, (raw_s, raw_t) in enumerate(zip(src_lines, tgt_lines, strict=True), 1):
        report.read += 1
        src, detail_s = _decode(raw_s)
        tgt, detail_t = _decode(raw_t)
        if src is None or tgt is None:
            bad_path, detail = (src_path, detail_s) if src is None else (tgt_path, detail_t)
            check.bad(bad_path, lineno, "invalid utf-8", detail)
            continue
        src, tgt = normalize_whitespace(src), normalize_whitespace(tgt)
        if not src or not tgt:
            check.bad(src_path if not src else tgt_path, lineno, "empty side")
            continue
        pairs.append(ParallelPair(src, tgt, sl, tl, f"{src_path}:{lineno}"))
    report.kept = len(pairs)
    logger.info(report.summary())
    return ParallelCorpus(f"{src_path.name},{tgt_path.name}", pairs, report)


def read_hf_dataset(  # noqa: C901, PLR0915 - one pass over the rows with one branch per malformed case (the file:row contract)
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
    import datasets  # slow to import: only when needed

    path = Path(path)
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
    if isinstance(ds, datasets.DatasetDict):
        names = list(ds.keys())
        if split is None:
            split = names[0] if len(names) == 1 else "train"
        if split not in ds:
            raise CorpusFormatError(
                path, None, f"no split {split!r}", hint=f"splits are {names}; pass split=..."
            )
        ds = ds[split]
    elif split is not None:
        logger.debug("%s is a single Dataset; split %r not used", path, split)

    wanted = [src_col, tgt_col] + [c for c in (src_lang_col, tgt_lang_col) if c is not None]
    missing = [c for c in wanted if c not in ds.column_names]
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
    check = _Checker(report, skip_bad_lines)
    pairs: list[ParallelPair] = []
    ds = ds.select_columns(wanted)
    batch_size = 4096
    for start in range(0, len(ds), batch_size):
        batch = ds[start : start + batch_size]
        for j in range(len(batch[src_col])):
            row = start + j
            report.read += 1
            src, tgt = batch[src_col][j], batch[tgt_col][j]
            if not isinstance(src, str) or not isinstance(tgt, str):
                bad = src if not isinstance(src, str) else tgt
                if bad is not None:
                    raise CorpusFormatError(path, row, f"text column holds {type(bad).__name__}, not str")
            src = normalize_whitespace(src) if isinstance(src, str) else ""
            tgt = normalize_whitespace(tgt) if isinstance(tgt, str) else ""
            if not src or not tgt:
                check.bad(path, row, "empty side", "(source)" if not src else "(target)")
                continue
            sl = batch[src_lang_col][j] if src_lang_col else arg_src
            tl = batch[tgt_lang_col][j] if tgt_lang_col else arg_tgt
            unknown = [c for c in (sl, tl) if not isinstance(c, str) or not is_valid_lang(c)]
            if unknown:
                check.bad(path, row, "unknown language code", repr(unknown[0]))
                continue
            pairs.append(ParallelPair(src, tgt, validate_lang(sl), validate_lang(tl), f"{path}:{row}"))
    report.kept = len(pairs)
    logger.info(report.summary())
    return ParallelCorpus(path.name, pairs, report)


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


def _looks_like_tsv(path: Path) -> bool:
    if path.suffix.lower() == ".tsv":
        return True
    with path.open("rb") as f:
        for raw in f:
            if raw.strip():
                return b"\t" in raw
    return False


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
        path = Path(spec)
        if path.is_dir():
            corpus = read_hf_dataset(
                path, src_lang=src_lang, tgt_lang=tgt_lang, split=split, skip_bad_lines=skip_bad_lines
            )
        elif path.is_file():
            if not _looks_like_tsv(path):
                raise CorpusFormatError(
                    path,
                    None,
                    "not a TSV file (no tab on the first line)",
                    hint="for one-sentence-per-line files pass 'SRC_FILE,TGT_FILE'",
                )
            corpus = read_tsv(path, src_lang=src_lang, tgt_lang=tgt_lang, skip_bad_lines=skip_bad_lines)
        elif "," in spec:
            parts = [Path(p.strip()) for p in spec.split(",")]
            if len(parts) != 2:
                raise ResourceError(f"{spec!r}: expected two files separated by one comma")
            for p in parts:
                if not p.is_file():
                    raise ResourceError(f"corpus file not found: {p} (from {spec!r})")
            corpus = read_aligned(*parts, src_lang=src_lang, tgt_lang=tgt_lang, skip_bad_lines=skip_bad_lines)
        else:
            raise ResourceError(
                f"corpus not found: {spec!r}. Give 'bible', a dataset directory, a TSV file, "
                "or two aligned files as 'SRC_FILE,TGT_FILE'"
            )
        if langs is not None:
            corpus = filter_langs(corpus, langs)
    if max_pairs is not None:
        corpus = subsample(corpus, max_pairs, seed=seed)
    logger.info("loaded %s: %d pairs %s", corpus.name, len(corpus), corpus.lang_pairs())
    return corpus


def read_text_lines(path: str | Path) -> tuple[list[str], int]:
    """One sentence per line of a UTF-8 file (line endings stripped), and how many lines are blank.
    A missing file or invalid UTF-8 is a :class:`CorpusFormatError` naming the file (and line)."""
    path = Path(path)
    _require_file(path)
    data = path.read_bytes().removeprefix(_UTF8_BOM)
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()  # the newline that ends the last line
    texts: list[str] = []
    for lineno, raw in enumerate(lines, 1):
        try:
            texts.append(raw.decode("utf-8").rstrip("\r"))
        except UnicodeDecodeError as exc:
            raise CorpusFormatError(path, lineno, f"invalid UTF-8 ({exc.reason})") from exc
    return texts, sum(not t.strip() for t in texts)


def check_output_file(path: str | Path, flag: str) -> None:
    """Refuse, before any work, an output file path that cannot be written: a folder, or a path
    under a regular file."""
    path = Path(path)
    if path.is_dir():
        raise BabelspaceError(f"{flag} {path} is a folder; give a file path")
    for parent in path.parents:
        if parent.exists():
            if not parent.is_dir():
                raise BabelspaceError(f"{flag} {path}: {parent} is a file, not a folder")
            break
