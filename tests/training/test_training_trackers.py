"""``--report-to``: the loss and dev scores reach accelerate's tracker (TensorBoard here, read back
from its event files), the run's tracker is ended however the run ends, and a missing tracker
package or an unknown tracker is one line before any work."""

from __future__ import annotations

import signal

import pytest
import yaml

from babelspace.cli import build_parser
from babelspace.cli.train import config_from_args
from babelspace.errors import TrainingError
from babelspace.training import trainer as tr
from babelspace.training.config import TrainConfig
from babelspace.training.trackers import flat_config
from tests.training.test_training_trainer import tiny_config, write_corpus


def _scalars(folder) -> dict[str, list[tuple[int, float]]]:
    """Every scalar tag of the TensorBoard events in ``folder``: [(step, value), ...]."""
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(folder))
    events.Reload()
    return {tag: [(e.step, e.value) for e in events.Scalars(tag)] for tag in events.Tags()["scalars"]}


@pytest.fixture()
def ended(monkeypatch) -> list[int]:
    """Counts ``Accelerator.end_training`` calls (the real one still runs)."""
    from accelerate import Accelerator

    calls: list[int] = []
    real = Accelerator.end_training

    def end_training(self) -> None:
        calls.append(1)
        real(self)

    monkeypatch.setattr(Accelerator, "end_training", end_training)
    return calls


def test_tensorboard_gets_the_loss_every_log_step_and_each_dev_check(
    tiny_teacher_dir, tiny_model_dir, tmp_path, ended
) -> None:
    pytest.importorskip("tensorboard")
    corpus = write_corpus(tmp_path / "pairs.tsv")
    cfg = tiny_config(
        tmp_path, tiny_teacher_dir, tiny_model_dir, corpus, max_steps=4, eval_every=2, log_every=1
    )
    res = tr.train(TrainConfig(**{**cfg.to_dict(), "report_to": "tensorboard"}))
    scalars = _scalars(res.output / "runs" / "babelspace")
    history = {h["step"]: h for h in res.history if "stage" not in h}
    assert [s for s, _ in scalars["loss"]] == [1, 2, 3, 4]
    assert [s for s, _ in scalars["dev_score"]] == [0, 2, 4]
    assert [s for s, _ in scalars["dev_mse"]] == [0, 2, 4]
    for step, value in scalars["dev_score"]:
        assert value == pytest.approx(history[step]["dev_score"], rel=1e-6)
    for step, value in scalars["loss"][1::2]:  # steps 2 and 4 are dev checks: the run log has their loss
        assert value == pytest.approx(history[step]["loss"], rel=1e-6)
    (hparams,) = (res.output / "runs" / "babelspace").glob("*/hparams.yml")
    logged = yaml.safe_load(hparams.read_text())
    assert logged["report_to"] == "tensorboard" and logged["batch_size"] == 8
    assert logged["data"] == str(corpus) and logged["max_pairs"] == "none"
    assert ended == [1]


def test_an_interrupted_run_ends_its_tracker(
    tiny_teacher_dir, tiny_model_dir, tmp_path, monkeypatch, ended
) -> None:
    """A signal at step 2 stops the run after a checkpoint; the tracker's run is ended all the same
    and holds the loss up to the step the run stopped at."""
    pytest.importorskip("tensorboard")
    real_step = tr.Trainer._step

    def step_then_signal(self, progress):
        out = real_step(self, progress)
        if progress.step == 2:
            self._stop_signal = signal.SIGTERM
        return out

    monkeypatch.setattr(tr.Trainer, "_step", step_then_signal)
    corpus = write_corpus(tmp_path / "pairs.tsv")
    cfg = tiny_config(tmp_path, tiny_teacher_dir, tiny_model_dir, corpus, max_steps=6, log_every=1)
    with pytest.raises(tr.TrainingInterrupted, match="stopped at step 2"):
        tr.train(TrainConfig(**{**cfg.to_dict(), "report_to": "tensorboard"}))
    assert ended == [1]
    assert [s for s, _ in _scalars(cfg.output / "runs" / "babelspace")["loss"]] == [1, 2]


def test_report_to_is_validated_and_a_missing_package_is_one_line(tmp_path, monkeypatch) -> None:
    import accelerate.utils

    parsed = config_from_args(build_parser().parse_args(["train", "--report-to", "tensorboard"]))
    assert parsed.report_to == "tensorboard" and TrainConfig().report_to == "none"
    with pytest.raises(TrainingError, match="--report-to must be one of none, tensorboard, wandb, mlflow"):
        TrainConfig(report_to="neptune")  # type: ignore[arg-type]

    def no_load(*_a, **_k):
        raise AssertionError("a model was loaded")

    monkeypatch.setattr(tr, "load_encoder", no_load)
    monkeypatch.setattr(accelerate.utils, "is_wandb_available", lambda: False)
    cfg = TrainConfig(report_to="wandb", device="cpu", output=tmp_path / "out", test_sentences=0)
    with pytest.raises(
        TrainingError, match=r"^--report-to wandb needs the wandb package: pip install wandb$"
    ):
        tr.train(cfg)
    assert not (tmp_path / "out").exists()


def test_the_tracker_config_is_flat_scalars() -> None:
    flat = flat_config(TrainConfig(data=["bible", "cldr:0.5"], langs=["de", "fr"], report_to="mlflow"))
    assert flat["data"] == "bible,cldr:0.5" and flat["langs"] == "de,fr" and flat["max_pairs"] == "none"
    assert flat["output"] == "output/babelspace-student" and flat["batch_size"] == 16
    assert all(isinstance(v, (bool, int, float, str)) for v in flat.values())


def test_runs_folder_is_kept_across_exports_and_removed_by_overwrite(tmp_path) -> None:
    from babelspace.training.output.folder import export_model_atomically, prepare_output

    out = tmp_path / "m"
    (out / "checkpoints").mkdir(parents=True)
    (out / "runs" / "babelspace").mkdir(parents=True)
    (out / "runs" / "babelspace" / "events").write_text("e")
    (out / "notes.txt").write_text("mine")

    def save(folder) -> None:
        folder.mkdir()
        (folder / "model.safetensors").write_text("w")

    export_model_atomically(save, out, {"step": 1})
    assert (out / "runs" / "babelspace" / "events").read_text() == "e" and (
        out / "model.safetensors"
    ).exists()
    prepare_output(out, resume=False, overwrite=True)
    assert not (out / "runs").exists() and (out / "notes.txt").read_text() == "mine"
