"""An output never lands on an input of the same command (writable.check_output_apart): encode,
mine, eval, export and train refuse it before any work, however the path is spelled."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from babelspace.cli import main
from babelspace.errors import BabelspaceError
from babelspace.training.config import TrainConfig
from babelspace.training.output.folder import check_output_apart_from_inputs, prepare_output
from babelspace.writable import check_output_apart


@pytest.fixture()
def model(tmp_path: Path) -> Path:
    """A stand-in model folder (the check reads paths only, never loads the model)."""
    folder = tmp_path / "M"
    (folder / "1_Pooling").mkdir(parents=True)
    (folder / "model.safetensors").write_bytes(b"weights")
    (folder / "modules.json").write_text("[]")
    return folder


def _refused(capsys, *argv: str) -> str:
    assert main(list(argv)) == 2
    return capsys.readouterr().err


def test_encode_refuses_the_model_weights_and_the_input_text(model, tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    Path("m.en").write_text("hello\nworld\n")
    err = _refused(capsys, "encode", "M", "m.en", "--out", "M/model.safetensors")
    assert "--out M/model.safetensors is a file of the model folder M (MODEL)" in err
    assert _refused(capsys, "encode", "M", "m.en", "--out", "./m.en").count("is the input FILE m.en") == 1
    assert "inside the model folder M" in _refused(capsys, "encode", "M", "m.en", "--out", "M/../M/v.npy")
    assert (model / "model.safetensors").read_bytes() == b"weights"
    assert Path("m.en").read_text() == "hello\nworld\n"


def test_symlinks_and_hard_links_to_an_input_count(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    Path("m.en").write_text("hello\n")
    os.symlink("m.en", "soft")
    os.link("m.en", "hard")
    for out in ("soft", "hard"):
        assert "is the input FILE m.en" in _refused(capsys, "encode", "minilm", "m.en", "--out", out)
    assert Path("m.en").read_text() == "hello\n"


def test_mine_refuses_an_input_as_out_and_a_model_folder_as_workdir(
    model, tmp_path, capsys, monkeypatch
) -> None:
    monkeypatch.chdir(tmp_path)
    for name in ("m.de", "m.en"):
        Path(name).write_text("a\nb\n")
    base = ["mine", "--src", "m.de", "--tgt", "m.en", "--model", "M"]
    assert "is the input --tgt m.en" in _refused(capsys, *base, "--out", "m.en")
    assert "inside the model folder M (--model)" in _refused(capsys, *base, "--out", "M/pairs.tsv")
    err = _refused(capsys, *base, "--out", "pairs.tsv", "--workdir", "M/work")
    assert "--workdir M/work is inside the model folder M" in err
    assert Path("m.en").read_text() == "a\nb\n" and not (model / "work").exists()


def test_eval_report_may_go_beside_the_model_but_never_over_its_files(model) -> None:
    models = [("MODEL", model)]
    check_output_apart(model / "eval.json", "--out", models=models, report_beside_model=True)  # new file
    (model / "eval.json").write_text(json.dumps({"model": "M", "tasks": {}, "config": {}}))
    check_output_apart(model / "eval.json", "--out", models=models, report_beside_model=True)  # rerun
    with pytest.raises(BabelspaceError, match="is a file of the model folder"):
        check_output_apart(model / "modules.json", "--out", models=models, report_beside_model=True)
    with pytest.raises(BabelspaceError, match="is inside the model folder"):
        check_output_apart(model / "vectors.npy", "--out", models=models)


def test_folder_outputs_may_not_hold_an_input(model, tmp_path) -> None:
    (tmp_path / "D").mkdir()
    (tmp_path / "D" / "p.tsv").write_text("a\tb\n")
    with pytest.raises(BabelspaceError, match="holds the input --data"):
        check_output_apart(
            tmp_path / "D", "--out", inputs=[("--data", tmp_path / "D" / "p.tsv")], folder=True
        )
    with pytest.raises(BabelspaceError, match="holds the model folder"):
        check_output_apart(tmp_path, "--plots", models=[("MODEL", model)], folder=True)


def test_train_refuses_its_student_its_data_folder_before_any_work(model, tmp_path) -> None:
    data = tmp_path / "D" / "p.tsv"
    data.parent.mkdir()
    data.write_text("a\tb\n")
    cfg = TrainConfig(student=str(model), teacher="minilm", data=[str(data)], output=model)
    with pytest.raises(BabelspaceError, match="is the model folder .* \\(--student\\)"):
        check_output_apart_from_inputs(cfg)
    cfg = TrainConfig(student="e5-small", teacher="minilm", data=[f"{data}:0.5"], output=data.parent)
    with pytest.raises(BabelspaceError, match="holds the input --data"):
        check_output_apart_from_inputs(cfg)
    check_output_apart_from_inputs(TrainConfig(data=[str(data)], output=tmp_path / "out"))  # fine


def test_a_dangling_link_out_is_named_with_its_target(tmp_path) -> None:
    link = tmp_path / "out"
    os.symlink(tmp_path / "nowhere" / "x", link)
    with pytest.raises(BabelspaceError, match="dangling symbolic link: it points to .*nowhere/x"):
        prepare_output(link, resume=False, overwrite=False)
    with pytest.raises(BabelspaceError, match="dangling symbolic link"):
        check_output_apart_from_inputs(TrainConfig(output=link))
    with pytest.raises(BabelspaceError, match="dangling symbolic link"):  # its folder is missing too
        check_output_apart(link, "--out")
    assert link.is_symlink() and not (tmp_path / "nowhere").exists()
