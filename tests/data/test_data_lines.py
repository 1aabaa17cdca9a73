"""The line reader core (`babelspace.data.lines`): one policy for BOM, line endings, blank tails,
UTF-8, column counts and raise-or-skip, shared by the corpus readers and ``encode``."""

from __future__ import annotations

from pathlib import Path

import pytest

from babelspace.data.lines import (
    BadLines,
    aligned_rows,
    decode_line,
    first_line,
    numbered_lines,
    require_file,
    rows,
    split_lines,
    strict_lines,
)
from babelspace.data.pairs import ReadReport
from babelspace.errors import CorpusFormatError, ResourceError
from babelspace.evaluation.formats.bucc import read_bucc
from babelspace.evaluation.formats.sts import read_stsb
from babelspace.evaluation.formats.tatoeba import read_tatoeba_dir
from babelspace.evaluation.tasks.sts import read_sts_file


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


def test_first_line_is_the_first_non_blank_line_as_split_lines_gives_it(tmp_path: Path) -> None:
    p = write(tmp_path / "a.txt", b"\xef\xbb\xbf \r\n\none\ttwo\r\nthree\n")
    assert first_line(p) == b"one\ttwo" == next(ln for ln in split_lines(p) if ln.strip())
    assert first_line(write(tmp_path / "b.txt", b"\xef\xbb\xbfx")) == b"x"
    assert first_line(write(tmp_path / "e.txt", b"\n \n")) is None


def test_format_sniffs_never_read_the_whole_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Telling a TSV from mined output reads one line: a 20M-pair corpus is never loaded whole."""
    from babelspace.data.formats import looks_like_tsv
    from babelspace.data.mined import is_mined_file

    p = write(tmp_path / "pairs.txt", b"0.9\ta\tb\n" + b"x\ty\n" * 1000)
    plain = write(tmp_path / "plain.txt", b"x\ty\n" * 1000)

    def whole(*_a, **_k):
        raise AssertionError("the whole file was read")

    monkeypatch.setattr(Path, "read_bytes", whole)
    monkeypatch.setattr(Path, "read_text", whole)
    assert is_mined_file(p) and looks_like_tsv(p)
    assert not is_mined_file(plain) and looks_like_tsv(plain)


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


def test_strict_lines_keeps_or_drops_the_blank_tail_and_raises_on_a_bad_byte(tmp_path: Path) -> None:
    f = write(tmp_path / "a.txt", b"\xef\xbb\xbfa\r\n\nb\n \n")
    assert list(strict_lines(f)) == [(1, "a"), (2, ""), (3, "b")]
    assert list(strict_lines(f, keep_blank_tail=True)) == [(1, "a"), (2, ""), (3, "b"), (4, " ")]
    write(f, b"a\nb\xffc\n")
    with pytest.raises(CorpusFormatError, match=r"a.txt:2: invalid utf-8 \(bad byte 0xff at byte offset 1\)"):
        list(strict_lines(f))


def test_evaluation_readers_share_the_line_policy(tmp_path: Path) -> None:
    """Tatoeba, BUCC and STS files: a BOM is no part of the first sentence, a bad byte names file:line."""
    tat = tmp_path / "tat"
    tat.mkdir()
    write(tat / "tatoeba.deu-eng.deu", b"\xef\xbb\xbfHallo\r\nWelt\r\n")
    write(tat / "tatoeba.deu-eng.eng", b"Hello\nWorld\n")
    assert read_tatoeba_dir(tat)["deu"].xx == ["Hallo", "Welt"]
    write(tat / "tatoeba.deu-eng.eng", b"Hello\nW\xe9rld\n")
    with pytest.raises(CorpusFormatError, match=r"tatoeba.deu-eng.eng:2: invalid utf-8"):
        read_tatoeba_dir(tat)
    bucc = tmp_path / "bucc"
    bucc.mkdir()
    write(bucc / "de-en.training.de", b"\xef\xbb\xbfde1\tHallo\n")
    write(bucc / "de-en.training.en", b"en1\tHello\nen2\tW\xe9rld\n")
    write(bucc / "de-en.training.gold", b"de1\ten1\n")
    with pytest.raises(CorpusFormatError, match=r"de-en.training.en:2: invalid utf-8"):
        read_bucc(bucc, "de")
    write(bucc / "de-en.training.en", b"en1\tHello\n")
    assert read_bucc(bucc, "de").src_ids == ["de1"]
    sts = write(tmp_path / "STS.en-de.txt", b"\xef\xbb\xbfscore\ts1\ts2\n4.0\tA.\tB.\n1.0\tC\xff.\tD.\n")
    with pytest.raises(CorpusFormatError, match=r"STS.en-de.txt:3: invalid utf-8"):
        read_sts_file(sts)
    write(sts, b"\xef\xbb\xbfscore\ts1\ts2\n4.0\tA.\tB.\n")
    assert read_sts_file(sts).s1 == ["A."]
    stsb = write(tmp_path / "sts-test.csv", "g\tf\t2012\t1\t3.0\tA\u2028B.\tC.\n".encode())
    assert read_stsb(stsb).s1 == ["A\u2028B."]  # a line ends at \n only, not at U+2028
