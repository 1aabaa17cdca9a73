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
    worker = Path(__file__).parent / "workers" / "fsdp_worker.py"
    ran = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
         str(worker), str(tiny_nodrop_dir)],
        env={**os.environ, "OMP_NUM_THREADS": "1"}, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr[-4000:]
    assert "OK refresh equals the unsharded student" in ran.stdout
    assert "OK resumed from the full state equals the uninterrupted run" in ran.stdout


def test_the_documented_fsdp_config_loads_as_fsdp2() -> None:
    from accelerate.commands.config.config_args import load_config_from_file

    config = load_config_from_file(str(Path(__file__).parents[1] / "configs" / "fsdp.yaml"))
    assert str(config.distributed_type) == "DistributedType.FSDP"
    assert config.fsdp_config["fsdp_version"] == 2
    assert config.fsdp_config["fsdp_transformer_layer_cls_to_wrap"] == "XLMRobertaLayer"
