"""One output check for every command that writes (writable.check_output): ``score`` and ``align``
refuse, before any work, an output that is an input, a file of the model, a side file that is an
input, a file of ``--background-*`` or of ``aligned:A+B``, a pairs list or an entry of it, a place
inside an input folder, or a dangling link; and an output folder that refuses a real file (root
passes ``os.access`` everywhere) is one line, not a traceback after encoding."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from babelspace.cli import main


@pytest.fixture()
def model(tmp_path: Path) -> Path:
    """A stand-in model folder (the output check reads paths only, never loads the model)."""
    folder = tmp_path / "mdl"
    (folder / "1_Pooling").mkdir(parents=True)
    (folder / "model.safetensors").write_bytes(b"weights")
    (folder / "modules.json").write_text("[]")
    return folder


@pytest.fixture()
def files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    Path("in.tsv").write_text("a house\tein Haus\na tree\tein Baum\n")
    Path("a.en").write_text("a house\na tree\n")
    Path("a2.de").write_text("ein Haus\nein Baum\n")
    Path("bg.de").write_text("eine Katze\n")
    for side in ("en", "de"):
        Path("f2", side).mkdir(parents=True)
        Path("f2", side, "doc0.txt").write_text("one\ntwo\n")
    Path("g2").mkdir()
    Path("g2/list.tsv").write_text("f2/en/doc0.txt\tf2/de/doc0.txt\n")
    Path("g2/f2/en").mkdir(parents=True)
    Path("g2/f2/de").mkdir(parents=True)
    Path("g2/f2/en/doc0.txt").write_text("one\n")
    Path("g2/f2/de/doc0.txt").write_text("eins\n")
    return tmp_path


def _refused(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert main(list(argv)) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err


def _unchanged(model: Path) -> None:
    assert Path("in.tsv").read_text() == "a house\tein Haus\na tree\tein Baum\n"
    assert Path("a2.de").read_text() == "ein Haus\nein Baum\n"
    assert Path("bg.de").read_text() == "eine Katze\n"
    assert Path("g2/list.tsv").read_text() == "f2/en/doc0.txt\tf2/de/doc0.txt\n"
    assert Path("f2/en/doc0.txt").read_text() == "one\ntwo\n"
    assert (model / "model.safetensors").read_bytes() == b"weights"


def test_score_refuses_to_write_over_what_it_reads(files, model, capsys) -> None:
    score = ["score", "--model", "mdl", "--threshold", "0"]
    assert "is the input BITEXT in.tsv" in _refused(
        capsys, *score[:1], "in.tsv", *score[1:], "--out", "in.tsv"
    )
    os.symlink("in.tsv", "link.tsv")
    assert "is the input BITEXT in.tsv" in _refused(
        capsys, "score", "in.tsv", *score[1:], "--out", "link.tsv"
    )
    err = _refused(capsys, "score", "in.tsv", *score[1:], "--out", "mdl/model.safetensors")
    assert "a file of the model folder mdl (--model)" in err
    Path("x.scores.tsv").write_text("a house\tein Haus\n")
    err = _refused(capsys, "score", "x.scores.tsv", *score[1:], "--out", "x.tsv")
    assert "--out's scores x.scores.tsv is the input BITEXT x.scores.tsv" in err
    err = _refused(capsys, "score", "in.tsv", *score[1:], "--background-tgt", "bg.de", "--out", "bg.de")
    assert "is the input --background-tgt bg.de" in err
    err = _refused(capsys, "score", "aligned:a.en+a2.de", *score[1:], "--out", "a2.de")
    assert "is the input BITEXT a2.de" in err
    assert "inside the input folder BITEXT f2" in _refused(
        capsys, "score", "f2", *score[1:], "--out", "f2/kept.tsv"
    )
    _unchanged(model)


def test_score_refuses_a_dangling_link_whose_target_cannot_be_created(files, model, capsys) -> None:
    os.symlink("gone/kept.tsv", "dang.tsv")
    err = _refused(capsys, "score", "in.tsv", "--model", "mdl", "--out", "dang.tsv")
    assert "--out dang.tsv is a dangling symbolic link: it points to gone/kept.tsv" in err
    assert Path("dang.tsv").is_symlink() and not Path("gone").exists()


def test_align_refuses_to_write_over_what_it_reads(files, model, capsys) -> None:
    src = ["align", "--src", "f2/en/doc0.txt", "--tgt", "f2/de/doc0.txt", "--model", "mdl"]
    assert "is the input --src f2/en/doc0.txt" in _refused(capsys, *src, "--out", "f2/en/doc0.txt")
    assert "a file of the model folder mdl (--model)" in _refused(
        capsys, *src, "--out", "mdl/model.safetensors"
    )
    pairs = ["align", "--pairs", "g2/list.tsv", "--model", "mdl"]
    assert "is the input --pairs g2/list.tsv" in _refused(capsys, *pairs, "--out", "g2/list.tsv")
    assert "is the input --pairs entry g2/f2/de/doc0.txt" in _refused(
        capsys, *pairs, "--out", "g2/f2/de/doc0.txt"
    )
    folders = ["align", "--src", "f2/en", "--tgt", "f2/de", "--model", "mdl"]
    err = _refused(capsys, *folders, "--out", "f2/en/out.tsv")
    assert "--out f2/en/out.tsv lies inside the input folder --src f2/en" in err
    _unchanged(model)
    assert not Path("f2/en/out.tsv").exists()


def test_align_refuses_an_output_whose_summary_would_be_an_input(files, model, capsys) -> None:
    Path("doc.summary.json").write_text("one\n")
    Path("doc.tsv").write_text("x\n")
    argv = ["align", "--src", "doc.summary.json", "--tgt", "a2.de", "--model", "mdl", "--out", "doc.tsv"]
    assert "--out's summary doc.summary.json is the input --src doc.summary.json" in _refused(capsys, *argv)


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs /proc (no file can be created there)")
@pytest.mark.parametrize("command", ["mine", "score", "align", "encode"])
def test_an_output_folder_that_refuses_a_real_file_is_one_line(files, model, capsys, command) -> None:
    """/proc accepts no new file even from root, for whom os.access says every folder is writable."""
    out = "/proc/babelspace-out/pairs.tsv"
    argv = {
        "mine": ["mine", "--src", "a.en", "--tgt", "a2.de", "--model", "mdl", "--workdir", "w", "--out", out],
        "score": ["score", "in.tsv", "--model", "mdl", "--workdir", "w", "--out", out],
        "align": ["align", "--src", "a.en", "--tgt", "a2.de", "--model", "mdl", "--out", out],
        "encode": ["encode", "mdl", "a.en", "--out", out],
    }[command]
    err = _refused(capsys, *argv)
    assert f"--out {out} is not writable: /proc does not accept new files" in err
    err = _refused(
        capsys, *argv[:-1], "pairs.tsv", *(["--workdir", "/proc/w"] if "--workdir" in argv else [])
    )
    if "--workdir" in argv:
        assert "--workdir /proc/w is not writable: /proc does not accept new files" in err
