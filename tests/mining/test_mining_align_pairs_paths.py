"""An ``align --pairs`` list is read inside its own folder: an entry that leaves it (``..``, an
absolute path, a link pointing out) is refused naming the list's line, unless
``--allow-outside-paths`` says the list is trusted."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from babelspace.cli import main
from babelspace.errors import CorpusFormatError
from babelspace.mining.align_docs import document_pairs


@pytest.fixture()
def tree(tmp_path: Path) -> Path:
    (tmp_path / "secret.txt").write_text("a private line\n")
    lists = tmp_path / "g" / "docs"
    lists.mkdir(parents=True)
    (lists / "a.en").write_text("one\n")
    (lists / "a.de").write_text("eins\n")
    return tmp_path


@pytest.mark.parametrize("entry", ["../secret.txt", "ABS", "docs/../../secret.txt", "link.txt"])
def test_entries_leaving_the_lists_folder_are_refused(tree, entry) -> None:
    if entry == "ABS":
        entry = str(tree / "secret.txt")
    os.symlink(tree / "secret.txt", tree / "g" / "link.txt")
    listing = tree / "g" / "list.tsv"
    listing.write_text(f"docs/a.en\tdocs/a.de\ndocs/a.en\t{entry}\n")
    with pytest.raises(CorpusFormatError, match=r"list\.tsv:2: .* lies outside the list's folder") as info:
        document_pairs(pairs_list=listing)
    assert "--allow-outside-paths" in str(info.value)
    pairs = document_pairs(pairs_list=listing, allow_outside_paths=True)
    assert Path(pairs[1].tgt).resolve() == (tree / "secret.txt").resolve()


def test_entries_inside_the_folder_are_read(tree) -> None:
    listing = tree / "g" / "list.tsv"
    listing.write_text("docs/a.en\t./docs/a.de\n")
    (pair,) = document_pairs(pairs_list=listing)
    assert pair.src == tree / "g" / "docs" / "a.en"
    assert ("--pairs", listing) in pair.read_from


def test_the_command_refuses_before_reading_and_copies_nothing(tree, capsys, monkeypatch) -> None:
    monkeypatch.chdir(tree)
    Path("g/list.tsv").write_text("docs/a.en\t/etc/hostname\n")
    argv = ["align", "--pairs", "g/list.tsv", "--method", "gale-church", "--out", "out.tsv"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "g/list.tsv:1: /etc/hostname lies outside the list's folder g" in err
    assert not Path("out.tsv").exists()
