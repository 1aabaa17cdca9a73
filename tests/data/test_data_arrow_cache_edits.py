"""The Arrow corpus cache notices a same-size edit of its own files (text edited in place inside
``corpora/<key>/pairs.arrow``): it warns once and converts again, so training never reads the
edited text. Each open hashes sampled blocks; a changed modification time makes it hash the file whole."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from babelspace.data.arrow_corpus import CorpusRows, ReadOptions, open_corpus


def _rows(path: Path, cache: Path) -> list[tuple[str, str]]:
    return [(p.src, p.tgt) for p in CorpusRows(open_corpus(str(path), ReadOptions(tgt_lang="de"), cache))]


def _edit_in_place(file: Path, old: bytes, new: bytes, keep_mtime: bool) -> None:
    st = file.stat()
    data = file.read_bytes()
    assert len(old) == len(new) and data.count(old) == 1
    with open(file, "r+b") as fh:  # in place: same inode, same size
        fh.seek(data.index(old))
        fh.write(new)
    if keep_mtime:
        os.utime(file, ns=(st.st_atime_ns, st.st_mtime_ns))


@pytest.mark.parametrize("keep_mtime", [False, True], ids=["edited", "edited-mtime-restored"])
def test_a_same_size_edit_inside_the_cache_is_detected(tmp_path, caplog, keep_mtime) -> None:
    path = tmp_path / "p.tsv"
    lines = [f"sentence number {i}\tSatz Nummer {i}" for i in range(200)] + ["a house\tein Haus"]
    path.write_text("\n".join(lines) + "\n")
    first = _rows(path, tmp_path / "cache")
    assert ("a house", "ein Haus") in first
    (folder,) = (tmp_path / "cache" / "corpora").iterdir()
    _edit_in_place(folder / "pairs.arrow", b"ein Haus", b"kein Hut", keep_mtime)
    caplog.clear()
    with caplog.at_level("WARNING", logger="babelspace.data"):
        again = _rows(path, tmp_path / "cache")
    assert again == first  # the edited text is never read
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warned) == 1 and "pairs.arrow changed since it was written" in warned[0], warned


def test_a_large_file_edit_outside_the_sampled_blocks_is_caught_by_its_changed_mtime(
    tmp_path, caplog
) -> None:
    path = tmp_path / "p.tsv"
    path.write_text("".join(f"line {i} of a longer corpus\tZeile {i} eines Korpus\n" for i in range(6000)))
    path.write_text(path.read_text() + "the needle\tdie Nadel\n")
    first = _rows(path, tmp_path / "cache")
    (folder,) = (tmp_path / "cache" / "corpora").iterdir()
    assert (folder / "pairs.arrow").stat().st_size > 16 * 4096 * 4  # the blocks sample a fraction of it
    _edit_in_place(folder / "pairs.arrow", b"Zeile 3001 eines", b"Zeile 3001 EINES", keep_mtime=False)
    with caplog.at_level("WARNING", logger="babelspace.data"):
        assert _rows(path, tmp_path / "cache") == first
    assert "pairs.arrow changed since it was written" in caplog.text
