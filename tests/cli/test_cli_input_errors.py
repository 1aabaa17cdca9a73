"""Errors that blame the right thing: ``encode MODEL . --out v.npy`` names FILE (a folder), not
``--out``; ``export --static --static-vocab-from empty.txt`` names the flag and the empty file, not
mining."""

from __future__ import annotations

from pathlib import Path

from babelspace.cli import main


def test_encode_of_a_folder_blames_the_input(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["encode", "minilm", ".", "--out", "v.npy"]) == 2
    err = capsys.readouterr().err
    assert "FILE . is a folder; give a text file with one sentence per line" in err
    assert "--out" not in err and not Path("v.npy").exists()


def test_static_export_with_an_empty_vocabulary_file_names_the_flag(tmp_path, capsys, tiny_model_dir) -> None:
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    argv = ["export", str(tiny_model_dir), "--static", "--static-vocab-from", str(empty)]
    assert main([*argv, "--out", str(tmp_path / "static")]) == 2
    err = capsys.readouterr().err
    assert f"--static-vocab-from {empty}: the file is empty" in err and "mining" not in err
    blank = tmp_path / "blank.txt"
    blank.write_text("\n \n")
    argv[-1] = str(blank)
    assert main([*argv, "--out", str(tmp_path / "static")]) == 2
    assert f"--static-vocab-from {blank}: no usable sentence" in capsys.readouterr().err
    assert not (tmp_path / "static").exists()
