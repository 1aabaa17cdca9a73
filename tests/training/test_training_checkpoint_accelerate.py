"""A checkpoint is the folder accelerate's ``save_state`` writes and ``load_state`` reads, completed
by babelspace's ``state.pt`` and manifest; a tampered or foreign one is refused in one line, and
nothing in a crafted file runs (whichever reader meets it first: babelspace's check or accelerate)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch

from babelspace.checkpoints.accelerated import load_parts, parts_bytes, saver
from babelspace.checkpoints.checkpoint import load_latest, save_checkpoint
from babelspace.checkpoints.files import UnsafeCheckpointError, manifest, read_meta
from babelspace.errors import TrainingError
from babelspace.training.config import TrainConfig
from babelspace.training.distributed import make_accelerator, release_accelerator
from babelspace.training.state.run_state import find_checkpoint

ACCELERATE_FILES = {"model.safetensors", "optimizer.bin", "scheduler.bin", "random_states_0.pkl"}


class _Tied(torch.nn.Module):
    """An output layer tied to the input embeddings, as the bottleneck decoder's is."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = torch.nn.Embedding(6, 4)
        self.out = torch.nn.Linear(4, 6)
        self.out.weight = self.emb.weight

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.out(self.emb(ids)).logsumexp(-1).mean()


class _Payload:
    """Unpickling this object runs a shell command that creates a file."""

    def __init__(self, target: Path) -> None:
        self.target = target

    def __reduce__(self):
        return (os.system, (f"touch {self.target}",))


@pytest.fixture
def accelerated():
    """A prepared model, optimizer and schedule after two steps (released afterwards)."""

    def build(seed: int, steps: int = 2):
        torch.manual_seed(seed)
        acc = make_accelerator(torch.device("cpu"), "fp32")
        model = _Tied()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2, fused=True)
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0 / (1 + s))
        model, opt, sched = acc.prepare(model, opt, sched)
        for _ in range(steps):
            opt.zero_grad()
            acc.backward(model(torch.tensor([[1, 2, 3]])))
            opt.step()
            sched.step()
        return acc, model, opt, sched

    yield build
    release_accelerator()


def _flip_a_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def _save(acc, model, opt, out: Path, step: int = 2) -> Path:
    state = {"step": step, "objective_name": "distill", "fingerprint": "f"}
    return save_checkpoint(
        out, step, state, run_id="r", save_parts=saver(acc, model), parts_bytes=parts_bytes(model, opt)
    )


def test_the_checkpoint_folder_is_what_accelerates_load_state_reads(accelerated, tmp_path) -> None:
    acc, model, opt, sched = accelerated(seed=0)
    path = _save(acc, model, opt, tmp_path)
    assert {p.name for p in path.iterdir()} == ACCELERATE_FILES | {"state.pt", "meta.json"}
    meta = read_meta(path)
    assert meta["format"] == "accelerate" and meta["tied"] == [["emb.weight", "out.weight"]]
    assert set(meta["files"]) == ACCELERATE_FILES | {"state.pt"}
    want = {k: v.clone() for k, v in model.state_dict().items()}
    want_opt = opt.state_dict()["state"]
    release_accelerator()

    # accelerate's own load_state, on a fresh run with other weights, restores the same state
    acc2, model2, opt2, sched2 = accelerated(seed=1, steps=0)
    assert not torch.equal(model2.state_dict()["emb.weight"], want["emb.weight"])
    acc2.load_state(str(path), load_kwargs={"weights_only": True})
    assert all(torch.equal(model2.state_dict()[k], v) for k, v in want.items())
    assert model2.out.weight is model2.emb.weight  # the tie survives the single stored copy
    got_opt = opt2.state_dict()["state"]
    assert all(torch.equal(got_opt[i]["exp_avg"], want_opt[i]["exp_avg"]) for i in want_opt)
    assert sched2.state_dict()["last_epoch"] == sched.state_dict()["last_epoch"] == 2
    # read back whole (tests, inspection): the tied name is there again, the run state beside it
    _, whole = load_latest(tmp_path)
    assert torch.equal(whole["objective"]["out.weight"], want["emb.weight"])
    assert whole["step"] == 2 and whole["scheduler"]["last_epoch"] == 2 and whole["scaler"] is None


@pytest.mark.parametrize(
    ("tamper", "why"),
    [
        (lambda p: _flip_a_byte(p / "optimizer.bin"), "optimizer.bin changed since it was written"),
        (lambda p: (p / "scheduler.bin").unlink(), "scheduler.bin is missing"),
        (lambda p: torch.save({}, p / "custom_checkpoint_0.pkl"), "custom_checkpoint_0.pkl is not one of"),
    ],
    ids=["edited", "missing", "foreign-file"],
)
def test_a_tampered_or_foreign_checkpoint_is_refused_in_one_line(accelerated, tmp_path, tamper, why) -> None:
    acc, model, opt, _ = accelerated(seed=0)
    path = _save(acc, model, opt, tmp_path / "out")
    tamper(path)
    assert load_latest(tmp_path / "out") is None  # not loaded (an older one would be used instead)
    with pytest.raises(TrainingError, match=rf"can be used \(the newest: .*step-00000002: .*{why}") as err:
        # refused before the data plan is used: none is needed
        find_checkpoint(TrainConfig(output=tmp_path / "out", resume=True), None)  # type: ignore[arg-type]
    assert "\n" not in str(err.value)


def test_crafted_accelerate_files_are_refused_and_never_run(accelerated, tmp_path) -> None:
    marker = tmp_path / "PWNED"
    acc, model, opt, _ = accelerated(seed=0)
    path = _save(acc, model, opt, tmp_path / "out")
    # the writer also rewrote the manifest: babelspace's weights_only check of each file refuses it
    torch.save({"state": _Payload(marker)}, path / "optimizer.bin")
    (path / "meta.json").write_text(json.dumps({**read_meta(path), "files": manifest(path)}))
    with pytest.raises(
        UnsafeCheckpointError, match=r"optimizer.bin: refusing .* names \S*system.*could run code"
    ):
        load_latest(tmp_path / "out")
    # and accelerate's load_state itself, reached without that check, reads weights_only: one line too
    with pytest.raises(UnsafeCheckpointError, match=r"step-00000002: refusing .*could run code") as err:
        load_parts(acc, path)
    assert "\n" not in str(err.value) and not marker.exists()
