"""Mixed precision in the trainer: bf16 autocast on the CPU, and an fp16 loss scaler whose state is
checkpointed (kill/resume stays exact) and whose skipped steps are counted, not failures."""

from __future__ import annotations

import signal

import numpy as np
import pytest
import torch

from babelspace.checkpoints.checkpoint import load_latest
from babelspace.training import trainer as tr
from babelspace.training.config import TrainConfig
from tests.training.test_training_trainer import tiny_config, write_corpus


def test_bf16_on_cpu_trains_like_fp32(tiny_teacher_dir, tiny_model_dir, tmp_path) -> None:
    corpus = write_corpus(tmp_path / "pairs.tsv", n=1000)
    runs = {}
    for precision in ("fp32", "bf16"):
        cfg = tiny_config(
            tmp_path / precision, tiny_teacher_dir, tiny_model_dir, corpus, dev_pairs=100, precision=precision
        )
        runs[precision] = tr.train(cfg)
    fp32, bf16 = runs["fp32"], runs["bf16"]
    assert bf16.precision == "bf16" and fp32.precision == "fp32"
    losses = [h["loss"] for h in bf16.history if "loss" in h]
    assert losses and np.isfinite(losses).all()
    delta = abs(bf16.history[-1]["dev_score"] - fp32.history[-1]["dev_score"])
    print(f"dev score fp32 {fp32.history[-1]['dev_score']:.2f} bf16 {bf16.history[-1]['dev_score']:.2f}")
    assert delta <= 2.0
    # the weights did move differently: bf16 really ran under autocast
    assert bf16.history[-1]["dev_mse"] != fp32.history[-1]["dev_mse"]


def _fp16_emulation(monkeypatch, init_scale: float) -> None:
    """accelerate enables fp16 only on GPUs; on the CPU give its Accelerator a real CPU GradScaler
    and fp16 autocast, so the trainer's scaler path (scaled backward, skipped steps, checkpointed
    scaler state) runs here exactly as it would on a GPU."""
    real = tr.make_accelerator

    def make(device, precision):
        acc = real(device, "fp32")
        acc.scaler = torch.amp.GradScaler(device.type, init_scale=init_scale, growth_interval=3)
        acc.native_amp = True
        acc.state._mixed_precision = "fp16"
        return acc

    monkeypatch.setattr(tr, "make_accelerator", make)


def test_fp16_scaler_state_resumes_exactly_and_skips_are_counted(
    tiny_teacher_dir, tiny_model_dir, tmp_path, monkeypatch
) -> None:
    _fp16_emulation(monkeypatch, init_scale=2.0**40)  # overflows at first: the scaler backs off
    corpus = write_corpus(tmp_path / "pairs.tsv")
    full = tr.train(tiny_config(tmp_path / "a", tiny_teacher_dir, tiny_model_dir, corpus, save_every=4))
    assert full.counts["skipped_by_scaler"] >= 1 and full.counts["skipped_nonfinite"] == 0
    assert full.steps == 12

    part_cfg = tiny_config(tmp_path / "b", tiny_teacher_dir, tiny_model_dir, corpus, save_every=4)
    t = tr.Trainer(part_cfg)
    real_step = tr.Trainer._step

    def step_then_stop(self, progress):  # type: ignore[no-untyped-def]
        out = real_step(self, progress)
        if progress.step == 6:
            self._stop_signal = signal.SIGTERM
        return out

    monkeypatch.setattr(tr.Trainer, "_step", step_then_stop)
    with pytest.raises(tr.TrainingInterrupted):
        t.run()
    saved = load_latest(part_cfg.output)
    assert saved is not None and saved[1]["step"] == 6
    assert saved[1]["scaler"]["scale"] < 2.0**40  # the backed-off scale is in the checkpoint
    monkeypatch.setattr(tr.Trainer, "_step", real_step)
    resumed = tr.train(TrainConfig(**{**part_cfg.__dict__, "resume": True}))
    assert resumed.steps == 12 and resumed.counts["skipped_by_scaler"] == full.counts["skipped_by_scaler"]
    a, b = load_latest(full.output)[1], load_latest(resumed.output)[1]
    assert a["scaler"] == b["scaler"]
    for k in a["objective"]:
        torch.testing.assert_close(a["objective"][k], b["objective"][k], rtol=0, atol=1e-6)
