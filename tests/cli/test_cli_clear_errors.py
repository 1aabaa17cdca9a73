"""One line, non-zero exit, before any work where it can be known before (issue 25 items 13-15):
truncated weights, unwritable --out/--plots, encode --out with another suffix, export --out when
the backend's extra is missing."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import numpy as np
import pytest

from babelspace.cli import main as cli_main
from babelspace.errors import ResourceError


@pytest.fixture()
def truncated_model(tiny_model_dir: Path, tmp_path: Path) -> Path:
    model = tmp_path / "truncated"
    shutil.copytree(tiny_model_dir, model)
    weights = next(model.rglob("model.safetensors"))
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    return model


def _one_line_error(capsys: pytest.CaptureFixture) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    errors = [line for line in err if line.startswith("babelspace: error:")]
    assert len(errors) == 1 and "Traceback" not in "\n".join(err), err
    return errors[0]


def test_truncated_weights_are_one_line_errors(
    truncated_model: Path, tiny_model_dir: Path, tmp_path: Path, capsys
) -> None:
    from babelspace.models.encoder import load_encoder

    with pytest.raises(ResourceError, match=r"model.safetensors looks truncated or damaged"):
        load_encoder(str(truncated_model), device="cpu")
    (tmp_path / "s.txt").write_text("hello\nworld\n")
    assert (
        cli_main(["encode", str(truncated_model), str(tmp_path / "s.txt"), "--out", str(tmp_path / "v.npy")])
        == 2
    )
    assert "looks truncated" in _one_line_error(capsys)
    assert not (tmp_path / "v.npy").exists()
    (tmp_path / "p.tsv").write_text("".join(f"the king {i}\tder könig {i}\n" for i in range(120)))
    for flag in ("--student", "--teacher"):
        argv = ["train", flag, str(truncated_model), "--data", str(tmp_path / "p.tsv"), "--tgt-lang", "de",
                "--out", str(tmp_path / f"out{flag}"), "--max-steps", "2", "--test-sentences", "0",
                "--cache-dir", str(tmp_path / "cache"), "--device", "cpu"]  # fmt: skip
        argv += ["--teacher" if flag == "--student" else "--student", str(tiny_model_dir)]
        assert cli_main(argv) == 2
        assert "looks truncated" in _one_line_error(capsys)


def test_a_truncated_module_weight_file_is_named_not_the_models(tiny_model_dir: Path, tmp_path: Path) -> None:
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Dense

    from babelspace.models.encoder import load_encoder

    model = SentenceTransformer(str(tiny_model_dir), device="cpu")
    model.append(Dense(32, 16, activation_function=torch.nn.Identity()))
    folder = tmp_path / "with_dense"
    model.save(str(folder))
    dense = next(p for p in folder.glob("*_Dense/model.safetensors"))
    dense.write_bytes(dense.read_bytes()[: dense.stat().st_size // 2])
    with pytest.raises(ResourceError) as caught:
        load_encoder(str(folder), device="cpu")
    assert f"({dense} looks truncated or damaged" in str(caught.value)
    assert f"{folder}/model.safetensors looks" not in str(caught.value)


def test_eval_refuses_unwritable_json_and_plots_before_evaluating(
    tmp_path: Path, capsys, monkeypatch
) -> None:
    import babelspace.evaluation.runner as runner

    monkeypatch.setattr(runner, "run_eval", lambda cfg: pytest.fail("evaluation started"))
    (tmp_path / "dir").mkdir()
    (tmp_path / "file").write_text("x")
    cases = [
        (["--out", str(tmp_path / "dir")], r"--out .*dir is a folder; give a file path"),
        (["--out", str(tmp_path / "file" / "r.json")], r"--out .*file is a file, not a folder"),
        (["--plots", str(tmp_path / "file")], r"--plots .*file is a file; give a folder path"),
        (["--plots", str(tmp_path / "file" / "p")], r"--plots .*file is a file, not a folder"),
    ]
    for flags, message in cases:
        assert cli_main(["eval", "minilm", *flags]) == 2
        assert pytest.importorskip("re").search(message, _one_line_error(capsys)), flags


def test_eval_refuses_a_read_only_json_place(tmp_path: Path, capsys, monkeypatch) -> None:
    import babelspace.evaluation.runner as runner

    monkeypatch.setattr(runner, "run_eval", lambda cfg: pytest.fail("evaluation started"))
    real = Path.write_bytes

    def read_only(self: Path, data: bytes) -> int:
        if self.parent == tmp_path / "ro":
            raise OSError(30, "Read-only file system")
        return real(self, data)

    (tmp_path / "ro").mkdir()
    monkeypatch.setattr(Path, "write_bytes", read_only)
    assert cli_main(["eval", "minilm", "--out", str(tmp_path / "ro" / "r.json")]) == 2
    assert "does not accept new files (Read-only file system)" in _one_line_error(capsys)
    assert cli_main(["eval", "minilm", "--plots", str(tmp_path / "ro" / "plots")]) == 2
    assert "--plots" in _one_line_error(capsys)


def test_encode_writes_exactly_the_out_path(tiny_model_dir: Path, tmp_path: Path, capsys) -> None:
    (tmp_path / "s.txt").write_text("hello\nworld\n")
    out = tmp_path / "vec.txt"
    assert (
        cli_main(
            ["encode", str(tiny_model_dir), str(tmp_path / "s.txt"), "--out", str(out), "--device", "cpu"]
        )
        == 0
    )
    assert f"to {out} " in capsys.readouterr().out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.txt", "vec.txt"]
    assert np.load(out).shape == (2, 32)


@pytest.mark.skipif(
    importlib.util.find_spec("optimum") is not None, reason="needs an environment without the onnx extra"
)
def test_export_out_without_the_backend_extra_copies_nothing(
    tiny_model_dir: Path, tmp_path: Path, capsys
) -> None:
    out = tmp_path / "copy"
    for _ in range(2):  # the retry gets the same answer, not "--out exists and is not empty"
        assert cli_main(["export", str(tiny_model_dir), "--backend", "onnx", "--out", str(out)]) == 2
        assert "backend 'onnx' needs" in _one_line_error(capsys)
        assert not out.exists()


def test_failed_export_removes_its_copy(tiny_model_dir: Path, tmp_path: Path, monkeypatch) -> None:
    from babelspace.models import backends

    def broken_export(folder: Path, backend: str, quantize: str) -> Path:
        (folder / "onnx").mkdir()
        (folder / "onnx" / "partial.onnx").write_bytes(b"x")
        raise ResourceError("export failed")

    monkeypatch.setattr(backends, "_require", lambda backend: None)
    monkeypatch.setattr(backends, "ensure_exported", broken_export)
    for out in (tmp_path / "new", tmp_path / "empty"):
        if out.name == "empty":
            out.mkdir()
        with pytest.raises(ResourceError, match="export failed"):
            backends.export_backend(str(tiny_model_dir), "onnx", out=out)
        assert out.exists() == (out.name == "empty") and not (out.exists() and any(out.iterdir()))
