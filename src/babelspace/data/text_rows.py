"""The one reader of each text format: TSV files and line-aligned file pairs, as corpus rows.

Training (the Arrow cache) and evaluation (`babelspace.data.readers`) both read these formats
through the functions here, so the errors (``path:line: reason``), the ``--skip-bad-lines`` reasons
and the counts are the same code:

- `tsv_chunks`: ``src<TAB>tgt`` or ``src<TAB>tgt<TAB>src_lang<TAB>tgt_lang`` lines; the first good
  line fixes the width (2 or 4), any other width is ``"wrong column count"``; 2-column lines take
  the languages of the options (source ``en`` when unset; no target language is an error). Clean
  blocks are split with Arrow compute (`babelspace.data.text_blocks`), any other block line by line.
- `aligned_file_rows`: two files where line i of one translates line i of the other; languages from
  the options, else from the file suffixes (``train.de`` -> ``de``); different line counts are one
  error naming both (never skipped).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

from babelspace.data.corpus_rows import Chunk, LangPairIds, Row, check_row, to_chunk
from babelspace.data.languages import lang_from_suffix, validate_lang
from babelspace.data.lines import INVALID_UTF8, WRONG_COLUMN_COUNT, BadLines, aligned_rows, decode_line
from babelspace.data.pairs import normalize_whitespace
from babelspace.data.text_blocks import TsvLayout, line_blocks, tsv_block
from babelspace.errors import CorpusFormatError

__all__ = ["TSV_COLUMNS", "aligned_file_rows", "file_lang", "tsv_chunks"]

TSV_COLUMNS = "columns are src, tgt[, src_lang, tgt_lang] separated by tabs"


def tsv_chunks(
    path: Path, src_lang: str | None, tgt_lang: str | None, bad: BadLines, langs: LangPairIds
) -> Iterator[Chunk]:
    """Chunks of the good lines of a TSV file (labelled ``path`` in errors)."""
    layout = TsvLayout(langs.default(src_lang, tgt_lang))
    for first_no, lines in line_blocks(path):
        chunk = tsv_block(lines, first_no, layout, lambda a, b: langs.of_codes((a, b)))
        if chunk is not None:
            bad.report.read += len(lines)
            yield chunk
        else:
            yield to_chunk(list(_tsv_rows(path, enumerate(lines, first_no), layout, bad, langs)))


def _tsv_rows(
    path: Path, lines: Iterable[tuple[int, bytes]], layout: TsvLayout, bad: BadLines, langs: LangPairIds
) -> Iterator[Row]:
    """The good rows of some lines, one by one."""
    for line_no, raw in lines:
        bad.report.read += 1
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
            columns = f"({len(cols)} tab-separated columns; {expected})"
            bad(path, line_no, WRONG_COLUMN_COUNT, columns, TSV_COLUMNS)
            continue
        if layout.width == 2 and layout.default is None:
            raise CorpusFormatError(
                path,
                line_no,
                "2-column TSV without language columns, and no target language was given",
                hint="pass --tgt-lang (and --src-lang if the source is not English), "
                "or add src_lang and tgt_lang as columns 3 and 4",
            )
        row = check_row(path, line_no, cols, layout.default, bad, langs)
        if row is not None:
            yield row


def aligned_file_rows(
    paths: list[Path], src_lang: str | None, tgt_lang: str | None, bad: BadLines, langs: LangPairIds
) -> Iterator[Row]:
    """The good rows of two line-aligned files (streamed; an empty side is reported for its file)."""
    lp = langs.of(file_lang(paths[0], src_lang, "src"), file_lang(paths[1], tgt_lang, "tgt"))
    for line_no, texts in aligned_rows(paths, bad):
        src, tgt = (normalize_whitespace(t) for t in texts)
        if not src or not tgt:
            bad(paths[0] if not src else paths[1], line_no, "empty side")
            continue
        yield src, tgt, lp, line_no


def file_lang(path: Path, code: str | None, side: str) -> str:
    """The language of one side: the ``--{side}-lang`` option, else the file's suffix."""
    lang = validate_lang(code) if code is not None else lang_from_suffix(path)
    if lang is None:
        raise CorpusFormatError(
            path,
            None,
            "cannot tell the language of this file",
            hint=f"pass --{side}-lang ({side}_lang=), or name the file with a language suffix such as '.de'",
        )
    return lang
