"""``--resume`` falls back past a checkpoint whose ``meta.json`` is missing, empty or junk (as it
does for a damaged ``optimizer.bin``) instead of a ``KeyError: 'objective'`` traceback; a plain
(non-zip) pickle in ``state.pt`` that names Python code stops the run in one line, and never runs."""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import pytest
import torch

from babelspace.checkpoints.accelerated import parts_bytes, saver
from babelspace.checkpoints.checkpoint import load_latest, save_checkpoint
from babelspace.checkpoints.files import UnsafeCheckpointError
from babelspace.errors import TrainingError
from babelspace.training.config import TrainConfig
from babelspace.training.distributed import make_accelerator, release_accelerator
from babelspace.training.state.run_state import find_checkpoint


class _Payload:
    """Unpickling this object runs a shell command that creates a file."""

    def __init__(self, target: Path) -> None:
        self.target = target

    def __reduce__(self):
        return (os.system, (f"touch {self.target}",))


@pytest.fixture
def two_checkpoints(tmp_path: Path):
    """Checkpoints at steps 2 and 4 of one run (accelerate format) in ``tmp_path / "out"``."""
    torch.manual_seed(0)
    acc = make_accelerator(torch.device("cpu"), "fp32")
    model = torch.nn.Linear(3, 2)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    model, opt = acc.prepare(model, opt)
    out = tmp_path / "out"
    for step in (2, 4):
        state = {"step": step, "objective_name": "distill", "fingerprint": "f"}
        save_checkpoint(
            out, step, state, run_id="r", save_parts=saver(acc, model), parts_bytes=parts_bytes(model, opt)
        )
    yield out
    release_accelerator()


def _resume(out: Path):
    return find_checkpoint(TrainConfig(output=out, resume=True), None)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("damage", "why"),
    [
        (lambda m: m.unlink(), "meta.json is missing beside accelerate's files"),
        (lambda m: m.write_text(""), "meta.json is empty or not a JSON object"),
        (lambda m: m.write_text("junk {"), "meta.json is empty or not a JSON object"),
        (lambda m: m.write_text("[1, 2]"), "meta.json is empty or not a JSON object"),
    ],
    ids=["missing", "empty", "junk", "not-an-object"],
)
def test_a_damaged_meta_json_falls_back_to_the_previous_checkpoint(
    two_checkpoints, damage, why, caplog
) -> None:
    out = two_checkpoints
    damage(out / "checkpoints" / "step-00000004" / "meta.json")
    path, state = load_latest(out, whole=False)
    assert path.name == "step-00000002" and state["step"] == 2
    assert why in caplog.text
    import shutil

    shutil.rmtree(out / "checkpoints" / "step-00000002")
    with pytest.raises(TrainingError, match=rf"no checkpoint in .* can be used \(the newest: .*{why}") as err:
        _resume(out)
    assert "\n" not in str(err.value)


def test_a_state_checkpoint_without_the_parts_is_not_resumed(tmp_path) -> None:
    folder = tmp_path / "out" / "checkpoints" / "step-00000003"
    folder.mkdir(parents=True)
    torch.save({"step": 3}, folder / "state.pt")  # written by hand: no objective, optimizer, schedule
    assert load_latest(tmp_path / "out", whole=False) is None


def test_a_plain_pickle_naming_code_stops_the_run_and_never_runs(tmp_path) -> None:
    marker = tmp_path / "PWNED"
    folder = tmp_path / "out" / "checkpoints" / "step-00000003"
    folder.mkdir(parents=True)
    (folder / "state.pt").write_bytes(pickle.dumps({"objective": _Payload(marker)}))  # not torch's zip
    with pytest.raises(UnsafeCheckpointError, match=r"state\.pt: refusing .* \(it names \S*system\)") as err:
        load_latest(tmp_path / "out", whole=False)
    assert "\n" not in str(err.value) and not marker.exists()
