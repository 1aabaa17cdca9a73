"""Sharded training helpers (babelspace.training.sharded): FSDP detection, the full-student copy
for evaluation/export and the full checkpoint state, on 2 CPU processes with torch's FSDP2."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from babelspace.errors import TrainingError
from babelspace.training.sharded import check_sharding, module_prefix, sharding_kind
from tests.conftest import run_two_processes


@pytest.mark.parametrize(
    ("kind", "expected"),
    [("DistributedType.FSDP", "FSDP"), ("DistributedType.MULTI_GPU", None), ("DistributedType.NO", None)],
)
def test_sharding_kind(kind: str, expected: str | None) -> None:
    acc = SimpleNamespace(distributed_type=kind)
    assert sharding_kind(acc) == expected
    assert check_sharding(acc) is (expected == "FSDP")


def test_deepspeed_is_refused_with_the_fsdp_way() -> None:
    with pytest.raises(TrainingError, match="FSDP"):
        check_sharding(SimpleNamespace(distributed_type="DistributedType.DEEPSPEED"))


def test_module_prefix() -> None:
    root = torch.nn.Module()
    root.student = torch.nn.Sequential(torch.nn.Linear(2, 2))
    assert module_prefix(root, root.student) == "student."
    assert module_prefix(root.student, root.student) == ""
    with pytest.raises(ValueError):
        module_prefix(root, torch.nn.Linear(2, 2))


@pytest.mark.slow
def test_fsdp2_two_gloo_processes_refresh_and_exact_resume(tiny_nodrop_dir: Path) -> None:
    worker = Path(__file__).parents[1] / "workers" / "fsdp_worker.py"
    ran = run_two_processes(str(worker), str(tiny_nodrop_dir))
    assert "OK refresh equals the unsharded student" in ran.stdout
    assert "OK resumed from the full state equals the uninterrupted run" in ran.stdout


def test_the_documented_fsdp_config_loads_as_fsdp2() -> None:
    from accelerate.commands.config.config_args import load_config_from_file

    config = load_config_from_file(str(Path(__file__).parents[2] / "configs" / "fsdp.yaml"))
    assert str(config.distributed_type) == "DistributedType.FSDP"
    assert config.fsdp_config["fsdp_version"] == 2
    assert config.fsdp_config["fsdp_transformer_layer_cls_to_wrap"] == "XLMRobertaLayer"


def _train_args(tiny_teacher_dir: Path, student: Path, corpus: Path, tmp_path: Path) -> list[str]:
    return [
        "train", "--teacher", str(tiny_teacher_dir), "--student", str(student), "--data", str(corpus),
        "--tgt-lang", "de", "--batch-size", "8", "--max-steps", "6", "--eval-every", "3", "--lr", "1e-3",
        "--dev-pairs", "16", "--max-seq-length", "16", "--projection-fit-pairs", "64",
        "--cache-dir", str(tmp_path / "cache"), "--test-sentences", "0", "--seed", "3",
        "--save-every", "3", "--keep-last", "3", "--threads", "1", "--device", "cpu",
    ]  # fmt: skip


def _sharded_train(args: list[str]) -> str:
    worker = Path(__file__).parents[1] / "workers" / "fsdp_train_worker.py"
    ran = run_two_processes(str(worker), *args)
    return ran.stdout


@pytest.mark.slow
def test_fsdp2_training_equals_one_process_and_resumes_exactly(
    tiny_teacher_dir: Path, tiny_nodrop_dir: Path, tmp_path: Path
) -> None:
    """Two CPU processes training a sharded student end with the weights of one unsharded process
    (same global batch); the exported model loads; a run resumed from the step-3 full checkpoint
    ends where the uninterrupted one did."""
    import shutil

    from sentence_transformers import SentenceTransformer

    from tests.training.test_training_trainer import _assert_same_weights, write_corpus

    corpus = write_corpus(tmp_path / "pairs.tsv")
    args = _train_args(tiny_teacher_dir, tiny_nodrop_dir, corpus, tmp_path)
    out = _sharded_train([*args, "--out", str(tmp_path / "sharded")])
    assert out.count("SHARDED") == 2 and "SHARDED 0 " not in out  # both ranks hold DTensor shards
    subprocess.run(
        [sys.executable, "-m", "babelspace", *args, "--out", str(tmp_path / "one")],
        check=True, env={**os.environ, "OMP_NUM_THREADS": "1"}, capture_output=True,
    )  # fmt: skip
    _assert_same_weights(tmp_path / "one", tmp_path / "sharded", rtol=1e-5, atol=1e-5)
    assert SentenceTransformer(str(tmp_path / "sharded"), device="cpu").encode(["the king"]).shape[0] == 1

    resumed = tmp_path / "resumed"
    shutil.copytree(tmp_path / "sharded", resumed)
    (last,) = [p for p in (resumed / "checkpoints").rglob("step-*6") if p.is_dir()]
    shutil.rmtree(last)  # as if killed after the step-3 checkpoint
    _sharded_train([*args, "--out", str(resumed), "--resume"])
    _assert_same_weights(tmp_path / "sharded", resumed, rtol=0, atol=1e-6)


@pytest.mark.parametrize("saved_sharded", [True, False])
def test_resume_across_fsdp_and_not_is_refused_clearly(saved_sharded: bool) -> None:
    from babelspace.training.state.run_state import restore_run_state

    resumed = (Path("out/checkpoints/step-00000004"), {"sharded": saved_sharded})
    with pytest.raises(TrainingError, match="FSDP.*Resume it the way it was launched"):
        restore_run_state(None, resumed, None, sharded=not saved_sharded)  # type: ignore[arg-type]
