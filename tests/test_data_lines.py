"""The line reader core (`babelspace.data.lines`): one policy for BOM, line endings, blank tails,
UTF-8, column counts and raise-or-skip, shared by the corpus readers and ``encode``."""

from __future__ import annotations

from pathlib import Path

import pytest

from babelspace.data.lines import (
    BadLines,
    aligned_rows,
    decode_line,
    numbered_lines,
    require_file,
    rows,
    split_lines,
)
from babelspace.data.pairs import ReadReport
from babelspace.errors import CorpusFormatError, ResourceError


def write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def bad_lines(skip: bool) -> BadLines:
    return BadLines(ReadReport("test"), skip)


def test_split_lines_drops_bom_crlf_and_blank_tail(tmp_path: Path) -> None:
    p = write(tmp_path / "a.txt", b"\xef\xbb\xbfone\r\n\ntwo\r\r\n  \n\n")
    assert split_lines(p) == [b"one", b"", b"two\r"]  # one \r per line ending, no more
    assert split_lines(p, keep_blank_tail=True) == [b"one", b"", b"two\r", b"  ", b""]
    assert split_lines(write(tmp_path / "b.txt", b"x")) == [b"x"]  # no final newline
    assert split_lines(write(tmp_path / "e.txt", b"")) == []
    assert split_lines(tmp_path / "e.txt", keep_blank_tail=True) == []


def test_decode_line_names_the_bad_byte() -> None:
    assert decode_line("é".encode()) == ("é", "")
    assert decode_line(b"ab\xffc") == (None, "(bad byte 0xff at byte offset 2)")


def test_require_file(tmp_path: Path) -> None:
    with pytest.raises(ResourceError, match="corpus file not found"):
        require_file(tmp_path / "nope")
    with pytest.raises(ResourceError, match="not a file"):
        require_file(tmp_path)


def test_numbered_lines_raises_or_counts(tmp_path: Path) -> None:
    p = write(tmp_path / "t.txt", b"a\n\xc3\x28\nc\n")
    with pytest.raises(
        CorpusFormatError, match=rf"^{p}:2: invalid utf-8 \(bad byte 0xc3 at byte offset 0\)$"
    ):
        list(numbered_lines(p, bad_lines(skip=False)))
    bad = bad_lines(skip=True)
    assert list(numbered_lines(p, bad)) == [(1, "a"), (3, "c")]
    assert bad.report.read == 3 and bad.report.skipped == {"invalid utf-8": 1}


def test_rows_first_allowed_width_fixes_the_width(tmp_path: Path) -> None:
    p = write(tmp_path / "t.tsv", b"x\na\tb\tc\nd\te\tf\ng\th\n")
    with pytest.raises(CorpusFormatError, match=rf"^{p}:1: wrong column count \(1 .*expected 2 or 3\)"):
        list(rows(p, bad_lines(skip=False), widths=(2, 3)))
    bad = bad_lines(skip=True)
    assert list(rows(p, bad, widths=(2, 3))) == [(2, ["a", "b", "c"]), (3, ["d", "e", "f"])]
    assert bad.report.read == 4 and bad.report.skipped == {"wrong column count": 2}
    u = write(tmp_path / "u.tsv", b"a\tb\tc\nd\te\n")
    with pytest.raises(CorpusFormatError, match=rf"^{u}:2: .*expected 3 as on line 1\) \(the hint\)$"):
        list(rows(u, bad_lines(skip=False), widths=(3,), hint="the hint"))


def test_rows_names_the_line_that_fixed_the_width(tmp_path: Path) -> None:
    p = write(tmp_path / "t.tsv", b"a\tb\tc\td\ne\tf\n")
    with pytest.raises(
        CorpusFormatError, match=rf"^{p}:2: wrong column count \(2 .*expected 4 as on line 1\) \(h\)$"
    ):
        list(rows(p, bad_lines(skip=False), hint="h"))


def test_aligned_rows(tmp_path: Path) -> None:
    s = write(tmp_path / "a.en", b"one\n\xff\nthree\n\n")
    t = write(tmp_path / "a.de", b"eins\n\xfe\ndrei\n")
    bad = bad_lines(skip=True)
    assert list(aligned_rows([s, t], bad)) == [(1, ["one", "eins"]), (3, ["three", "drei"])]
    # a row bad in both files is one skipped row, reported for the first file
    assert bad.report.read == 3 and bad.report.skipped == {"invalid utf-8": 1}
    with pytest.raises(CorpusFormatError, match=rf"^{s}:2: invalid utf-8"):
        list(aligned_rows([s, t], bad_lines(skip=False)))


def test_aligned_rows_misalignment_is_never_skipped(tmp_path: Path) -> None:
    s = write(tmp_path / "a.en", b"1\n2\n3\n")
    t = write(tmp_path / "a.de", b"1\n")
    e = write(tmp_path / "e.de", b"\n\n")
    for files, where, what in (
        ([s, t], f"{t}:1", f"file ends here after 1 lines, but {s} has 3"),
        ([t, s], f"{t}:1", f"file ends here after 1 lines, but {s} has 3"),
        ([s, e], f"{e}", f"file is empty, but {s} has 3 lines"),
    ):
        with pytest.raises(
            CorpusFormatError, match=f"^{where}: {what} \\(the two files must be line-aligned"
        ):
            list(aligned_rows(files, bad_lines(skip=True)))
