"""Checkpoints load without running code, belong to one run, and resume refuses changed settings."""

from __future__ import annotations

import json
import os
import random
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from babelspace.checkpoints.checkpoint import (
    UnsafeCheckpointError,
    checkpoint_root,
    checkpoint_runs,
    latest_run_id,
    list_checkpoints,
    load_latest,
    new_run_id,
    rng_state,
    save_checkpoint,
    set_rng_state,
)
from babelspace.errors import TrainingError
from babelspace.training.config import TrainConfig
from babelspace.training.state.resume_settings import config_changes


class _Payload:
    """Unpickling this object runs a shell command that creates a file."""

    def __init__(self, target: Path) -> None:
        self.target = target

    def __reduce__(self):
        return (os.system, (f"touch {self.target}",))


def _trainer_like_state() -> dict:
    from transformers import get_linear_schedule_with_warmup

    from babelspace.data.pairs import ParallelPair
    from babelspace.data.sampling import BalancedBatchSampler

    model = torch.nn.Linear(4, 3)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    sched = get_linear_schedule_with_warmup(opt, 2, 10)
    model(torch.randn(2, 4)).sum().backward()
    opt.step()
    sched.step()
    pairs = [ParallelPair(f"s{i}", f"t{i}", "en", "de", f"f:{i}") for i in range(10)]
    sampler = BalancedBatchSampler(pairs, 4, seed=1)
    cfg = TrainConfig(output=Path("/tmp/x"), cache_dir=Path("/tmp/c"))
    return {
        "objective": model.state_dict(),
        "objective_name": "distill",
        "optimizer": opt.state_dict(),
        "scheduler": sched.state_dict(),
        "sampler": sampler.state_dict(batches_done=3),
        "rng": rng_state(),
        "step": 3,
        "history": [{"step": 0, "dev_score": 1.5}],
        "best": {"dev_score": float("-inf")},
        "best_step": 0,
        "skipped_nonfinite": 0,
        "fingerprint": "abc",
        "config": cfg.to_dict(),
    }


def test_trainer_state_round_trips_with_weights_only(tmp_path) -> None:
    state = _trainer_like_state()
    save_checkpoint(tmp_path, 3, state, run_id="r1")
    path, loaded = load_latest(tmp_path)
    assert path.name == "step-00000003"
    assert loaded["run_id"] == "r1" and loaded["config"]["output"] == "/tmp/x"
    assert loaded["sampler"] == state["sampler"] and loaded["history"] == state["history"]
    assert torch.equal(loaded["objective"]["weight"], state["objective"]["weight"])
    assert loaded["scheduler"]["last_epoch"] == 1


def test_rng_states_restore_exactly_after_a_weights_only_load(tmp_path) -> None:
    random.seed(5)
    np.random.seed(6)
    torch.manual_seed(7)
    random.gauss(0, 1)  # a cached Gaussian is part of the state
    save_checkpoint(tmp_path, 1, {"rng": rng_state()})
    want = (random.random(), np.random.rand(3).tolist(), torch.rand(3).tolist(), random.gauss(0, 1))
    random.seed(0)
    np.random.seed(0)
    torch.manual_seed(0)
    set_rng_state(load_latest(tmp_path)[1]["rng"])
    got = (random.random(), np.random.rand(3).tolist(), torch.rand(3).tolist(), random.gauss(0, 1))
    assert got == want


def test_checkpoint_with_code_is_refused_and_the_code_does_not_run(tmp_path) -> None:
    marker = tmp_path / "PWNED"
    save_checkpoint(tmp_path / "out", 2, {"step": 2, "rng": rng_state()})  # an older, good one
    save_checkpoint(tmp_path / "out", 4, {"step": 4, "evil": _Payload(marker)})
    with pytest.raises(UnsafeCheckpointError, match=r"step-00000004/state.pt: refusing.*could run code"):
        load_latest(tmp_path / "out")
    assert not marker.exists()
    assert issubclass(UnsafeCheckpointError, TrainingError)


def test_damaged_newest_checkpoint_still_falls_back(tmp_path) -> None:
    save_checkpoint(tmp_path, 2, {"step": 2})
    newest = save_checkpoint(tmp_path, 4, {"step": 4})
    (newest / "state.pt").write_bytes((newest / "state.pt").read_bytes()[:40])
    path, state = load_latest(tmp_path)
    assert path.name == "step-00000002" and state["step"] == 2


def test_pruning_keeps_other_runs_checkpoints(tmp_path) -> None:
    old, new = new_run_id(), new_run_id()
    assert old != new and len(old) == 12
    for step in (10, 12):
        save_checkpoint(tmp_path, step, {"step": step}, keep_last=2, run_id=old)
    for step in (2, 4, 6, 8):
        save_checkpoint(tmp_path, step, {"step": step}, keep_last=2, run_id=new)
    names = [p.name for p in list_checkpoints(tmp_path)]
    assert names == ["step-00000006", "step-00000008", "step-00000010", "step-00000012"]
    assert [p.name for p in list_checkpoints(tmp_path, run_id=new)] == ["step-00000006", "step-00000008"]
    assert checkpoint_runs(tmp_path) == {old: 12, new: 8}
    assert latest_run_id(tmp_path) == new  # written last, although its steps are lower
    path, state = load_latest(tmp_path, run_id=new)
    assert state["step"] == 8 and state["run_id"] == new
    assert json.loads((path / "meta.json").read_text())["run_id"] == new


def test_stray_non_numeric_step_folder_is_ignored(tmp_path) -> None:
    save_checkpoint(tmp_path, 2, {"step": 2})
    shutil.copytree(checkpoint_root(tmp_path) / "step-00000002", checkpoint_root(tmp_path) / "step-backup")
    (checkpoint_root(tmp_path) / "step-7x").mkdir()
    (checkpoint_root(tmp_path) / "step-7x" / "meta.json").write_text("{}")
    assert [p.name for p in list_checkpoints(tmp_path)] == ["step-00000002"]
    assert load_latest(tmp_path)[1]["step"] == 2


def test_config_changes_names_trajectory_flags_only() -> None:
    saved = TrainConfig(max_steps=12, save_every=2).to_dict()
    same = TrainConfig(
        max_steps=40, save_every=5, output=Path("elsewhere"), threads=1, resume=True, eval_every=3
    ).to_dict()
    assert config_changes(saved, same) == []
    assert config_changes(saved, {**saved, "lr": 1e-4}) == []  # the default for distill, made explicit
    new = TrainConfig(batch_size=8, lr=1e-2, seed=7, data=["a.tsv"], freeze_embeddings=False).to_dict()
    assert config_changes(saved, new) == [
        "--batch-size 16 -> 8",
        f"--data {','.join(TrainConfig().data)} -> a.tsv",
        "--train-embeddings False -> True",
        "--lr 0.0001 -> 0.01",
        "--seed 42 -> 7",
    ]


def test_config_changes_checks_settings_it_does_not_know() -> None:
    assert config_changes({"new_knob": 1}, {"new_knob": 2}) == ["--new-knob 1 -> 2"]
    assert config_changes({"objective_weights": None}, {"objective_weights": "0.5"}) == [
        "--objective-weights None -> 0.5"
    ]
