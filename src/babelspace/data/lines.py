"""The one line reader behind babelspace's text-file readers: the ``path:line`` contract in one place.

The shared policy, so every reader treats a file the same way:

- a missing path or a folder is a `ResourceError` naming it (`require_file`);
- a leading UTF-8 byte-order mark is dropped; a line ends at ``\\n`` and one ``\\r`` before it is
  dropped too (CRLF files); by default blank lines at the very end are not lines
  (`split_lines`);
- lines are decoded one by one, so a bad byte is reported on its own line
  (``invalid utf-8 (bad byte 0xff at byte offset 3)``, `decode_line`);
- a bad line either raises `CorpusFormatError` (``path:line: reason``) or, when the reader was
  asked to skip bad lines, is counted in its `ReadReport` under the reason (`BadLines`);
- `numbered_lines` yields ``(line_no, text)`` for the lines that decode (`strict_lines`: raising on
  the first one that does not); `rows` yields ``(line_no, fields)`` for a tab-separated file,
  where the first line of an allowed width fixes the width and any other width is a
  ``"wrong column count"`` line; `aligned_rows` yields ``(line_no, fields)`` for line-aligned
  files (one field per file, streamed by `stream_lines`), and a different number of lines is never
  skippable (that is a broken corpus, not one bad line).

Line numbers are 1-based. The row iterators count every row they read in ``report.read``.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from pathlib import Path

from babelspace.data.pairs import ReadReport
from babelspace.errors import CorpusFormatError, ResourceError

__all__ = [
    "BadLines",
    "aligned_rows",
    "decode_line",
    "first_line",
    "numbered_lines",
    "require_file",
    "rows",
    "split_lines",
    "stream_lines",
    "strict_lines",
]

UTF8_BOM = b"\xef\xbb\xbf"
INVALID_UTF8 = "invalid utf-8"
WRONG_COLUMN_COUNT = "wrong column count"


class BadLines:
    """Raise-or-skip for bad lines: one ``path:line: reason`` error, or one counted skip."""

    def __init__(self, report: ReadReport, skip_bad_lines: bool) -> None:
        self.report = report
        self.skip = skip_bad_lines

    def __call__(
        self, path: Path | str, line: int, reason: str, detail: str = "", hint: str | None = None
    ) -> None:
        """Report line ``line`` of ``path`` as bad for ``reason`` (``detail`` says how)."""
        if not self.skip:
            raise CorpusFormatError(path, line, f"{reason} {detail}".strip(), hint=hint)
        self.report.add_skip(reason, f"{path}:{line}" + (f" {detail}" if detail else ""))


def require_file(path: Path) -> None:
    """A `ResourceError` unless ``path`` is an existing regular file."""
    if not path.exists():
        raise ResourceError(f"corpus file not found: {path}")
    if not path.is_file():
        raise ResourceError(f"not a file: {path}")


def split_lines(path: Path, *, keep_blank_tail: bool = False) -> list[bytes]:
    """The file's lines as bytes, without BOM and line endings.

    Trailing blank (whitespace-only) lines are dropped, unless ``keep_blank_tail``: then only the
    newline that ends the last line does not start another one.
    """
    lines = path.read_bytes().removeprefix(UTF8_BOM).split(b"\n")
    if keep_blank_tail and lines[-1] == b"":
        lines.pop()
    lines = [ln.removesuffix(b"\r") for ln in lines]
    while not keep_blank_tail and lines and not lines[-1].strip():
        lines.pop()
    return lines


def first_line(path: Path) -> bytes | None:
    """The first non-blank line of ``path`` as `split_lines` would give it (no BOM, no line
    ending), read line by line: a format sniff never loads the whole file. None when every line
    is blank."""
    with path.open("rb") as f:
        for n, raw in enumerate(f):
            line = (raw.removeprefix(UTF8_BOM) if n == 0 else raw).removesuffix(b"\n").removesuffix(b"\r")
            if line.strip():
                return line
    return None


def decode_line(raw: bytes) -> tuple[str | None, str]:
    """``(text, "")``, or ``(None, detail)`` naming the first bad byte when ``raw`` is not UTF-8."""
    try:
        return raw.decode("utf-8"), ""
    except UnicodeDecodeError as exc:
        return None, f"(bad byte 0x{raw[exc.start]:02x} at byte offset {exc.start})"


def numbered_lines(path: Path, bad: BadLines, *, keep_blank_tail: bool = False) -> Iterator[tuple[int, str]]:
    """``(line_no, text)`` for each line of ``path`` that decodes as UTF-8; the others go to ``bad``.

    ``keep_blank_tail`` as in `split_lines`.
    """
    for line_no, raw in enumerate(split_lines(path, keep_blank_tail=keep_blank_tail), 1):
        bad.report.read += 1
        text, detail = decode_line(raw)
        if text is None:
            bad(path, line_no, INVALID_UTF8, detail)
            continue
        yield line_no, text


def strict_lines(path: Path, *, keep_blank_tail: bool = False) -> Iterator[tuple[int, str]]:
    """`numbered_lines` that skip nothing: the first line that is not UTF-8 raises ``path:line``."""
    bad = BadLines(ReadReport(str(path)), skip_bad_lines=False)
    return numbered_lines(path, bad, keep_blank_tail=keep_blank_tail)


def rows(
    path: Path, bad: BadLines, widths: Sequence[int] = (2, 4), hint: str | None = None
) -> Iterator[tuple[int, list[str]]]:
    """``(line_no, fields)`` for each good line of a tab-separated file.

    The first decodable line whose field count is in ``widths`` fixes the width; every other line
    must match it. Undecodable lines and lines of another width go to ``bad`` (``hint`` says what
    the columns are).
    """
    width: int | None = None
    first = 0
    for line_no, text in numbered_lines(path, bad):
        fields = text.split("\t")
        if width is None and len(fields) in widths:
            width, first = len(fields), line_no
        if len(fields) != width:
            expected = (
                f"expected {width} as on line {first}"
                if width
                else "expected " + " or ".join(str(w) for w in widths)
            )
            bad(path, line_no, WRONG_COLUMN_COUNT, f"({len(fields)} tab-separated columns; {expected})", hint)
            continue
        yield line_no, fields


def stream_lines(path: Path) -> Iterator[tuple[int, bytes]]:
    """``(line_no, raw)`` as `split_lines` splits them, streamed: no BOM, no line ending, blank lines
    at the very end left out (held back until a non-blank line follows)."""
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


def aligned_rows(paths: Sequence[Path], bad: BadLines) -> Iterator[tuple[int, list[str]]]:
    """``(line_no, fields)`` for line-aligned files, streamed: field ``k`` is line ``line_no`` of
    ``paths[k]``.

    Files of different lengths (after trailing blank lines) raise a `CorpusFormatError` naming the
    shortest file and the line where it ends, whatever ``bad`` skips (once the files are read to
    their ends). A line that is not UTF-8 in any file makes the row bad (reported once, for the first
    such file).
    """
    counts = [0] * len(paths)
    for line_no, raws in enumerate(itertools.zip_longest(*map(stream_lines, paths)), 1):
        counts = [c + (r is not None) for c, r in zip(counts, raws, strict=True)]
        if any(r is None for r in raws):  # one file is longer: count on, to name both lengths
            continue
        bad.report.read += 1
        decoded = [decode_line(r[1]) for r in raws]
        broken = next((k for k, (text, _) in enumerate(decoded) if text is None), None)
        if broken is not None:
            bad(paths[broken], line_no, INVALID_UTF8, decoded[broken][1])
            continue
        yield line_no, [text for text, _ in decoded if text is not None]  # all are, here
    check_aligned(paths, counts)


def check_aligned(paths: Sequence[Path], counts: list[int]) -> None:
    """Raise unless every file has the same number of lines, naming where the shortest one ends."""
    by_length = sorted(zip(paths, counts, strict=True), key=lambda pc: pc[1])
    (short, n_short), (long_, n_long) = by_length[0], by_length[-1]
    if n_short == n_long:
        return
    raise CorpusFormatError(
        short,
        n_short or None,  # an empty file has no line 0 to point at
        f"file ends here after {n_short} lines, but {long_} has {n_long}"
        if n_short
        else f"file is empty, but {long_} has {n_long} lines",
        hint=f"{'the two files' if len(paths) == 2 else 'the files'} must be line-aligned; "
        "check for a missing or extra line",
    )
