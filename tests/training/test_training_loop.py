"""The training loop's step: gradient accumulation, the device-side non-finite guard and clip count,
``--batch-size auto``, the paper presets as regimes and their warnings."""

from __future__ import annotations

import json

import pytest
import torch

from babelspace.checkpoints.checkpoint import load_latest
from babelspace.cli import build_parser
from babelspace.cli.train import config_from_args
from babelspace.errors import TrainingError
from babelspace.training.auto_batch import _device_module, largest_fitting
from babelspace.training.batches import micro_batches
from babelspace.training.config import TrainConfig
from babelspace.training.regimes import regime_warnings
from babelspace.training.step_guard import StepGuard
from babelspace.training.trainer import train
from tests.training.test_training_trainer import tiny_config, write_corpus


def _cfg(*argv: str) -> TrainConfig:
    return config_from_args(build_parser().parse_args(["train", *argv]))


# ----------------------------------------------------------------------------- gradient accumulation
def test_micro_batches_cut_a_share_into_k_passes_in_order() -> None:
    assert micro_batches(list(range(16)), 2) == [list(range(8)), list(range(8, 16))]
    assert micro_batches(list(range(7)), 3) == [[0, 1, 2], [3, 4], [5, 6]]
    assert micro_batches([1, 2], 1) == [[1, 2]]


def test_grad_accum_2_of_8_equals_batch_16(tiny_teacher_dir, tiny_nodrop_dir, tmp_path, monkeypatch) -> None:
    """Mean losses: two accumulated passes of 8 pairs give the gradients and weights of one pass of
    16 (the same planned batches: the sampler plans batch_size x grad_accum pairs per step). The
    gradients are compared too: AdamW hides a wrong constant factor in the weights."""
    corpus = write_corpus(tmp_path / "pairs.tsv")
    grads: list[torch.Tensor] = []
    real_step = torch.optim.AdamW.step

    def recording_step(self, *a, **k):  # type: ignore[no-untyped-def]
        grads.append(
            torch.cat(
                [p.grad.flatten() for g in self.param_groups for p in g["params"] if p.grad is not None]
            )
        )
        return real_step(self, *a, **k)

    monkeypatch.setattr(torch.optim.AdamW, "step", recording_step)
    common = dict(max_steps=6, save_every=6, eval_every=6, projection_init="random", warmup=2, grad_clip=0)
    one = train(
        tiny_config(tmp_path / "a", tiny_teacher_dir, tiny_nodrop_dir, corpus, batch_size=16, **common)
    )
    two = train(
        tiny_config(
            tmp_path / "b", tiny_teacher_dir, tiny_nodrop_dir, corpus, batch_size=8, grad_accum=2, **common
        )
    )
    assert one.steps == two.steps == 6 and one.counts["optimizer_steps"] == 6
    assert len(grads) == 12
    for g1, g2 in zip(grads[:6], grads[6:], strict=True):
        torch.testing.assert_close(g2, g1, rtol=1e-4, atol=1e-6)
    a, b = load_latest(one.output)[1]["objective"], load_latest(two.output)[1]["objective"]
    moved = max(float((a[k] - b[k]).abs().max()) for k in a)
    assert moved <= 1e-5
    assert one.history[-1]["loss"] == pytest.approx(two.history[-1]["loss"], abs=1e-5)
    # the run did train: the comparison is not between two untouched models
    assert abs(one.history[-1]["dev_mse"] - one.history[1]["dev_mse"]) > 1e-3


def test_epochs_count_optimizer_steps_with_accumulation(tiny_teacher_dir, tiny_model_dir, tmp_path) -> None:
    corpus = write_corpus(tmp_path / "pairs.tsv", n=160)  # 144 training pairs after 16 dev pairs
    res = train(
        tiny_config(
            tmp_path,
            tiny_teacher_dir,
            tiny_model_dir,
            corpus,
            batch_size=8,
            grad_accum=3,
            max_steps=None,
            epochs=1.0,
            eval_every=100,
        )
    )
    assert res.steps == 144 // (8 * 3)


# ----------------------------------------------------------------------------- non-finite guard, clipping
def _adamw_step(guard: StepGuard, step: int, p: torch.nn.Parameter, opt, grad: torch.Tensor) -> None:
    p.grad = grad.clone()
    loss = grad.sum()
    norm = torch.nn.utils.clip_grad_norm_([p], guard.max_norm)
    guard.check(step, loss, norm, opt)
    opt.step()
    guard.disarm(opt)


def test_guard_skips_a_poisoned_step_exactly_and_counts_clipping() -> None:
    p = torch.nn.Parameter(torch.ones(4))
    opt = torch.optim.AdamW([p], lr=0.1, weight_decay=0.1, fused=True)
    guard = StepGuard(max_norm=1.0)
    _adamw_step(guard, 1, p, opt, torch.full((4,), 3.0))  # norm 6: clipped
    weights, state = p.detach().clone(), {k: v.clone() for k, v in opt.state[p].items()}
    _adamw_step(guard, 2, p, opt, torch.tensor([1.0, float("nan"), 0.0, 0.0]))  # poisoned
    assert torch.equal(p.detach(), weights)  # no update, no weight decay
    for k, v in opt.state[p].items():
        assert torch.equal(v, state[k]), k  # moments and AdamW's step count untouched
    _adamw_step(guard, 3, p, opt, torch.full((4,), 0.1))  # norm 0.2: not clipped, a real update
    assert not torch.equal(p.detach(), weights)
    report = guard.read()
    assert report.skipped == [2] and report.bad_loss == [2] and report.clipped == 1
    assert guard.pending == 0 and guard.read().skipped == []


def test_clipped_steps_are_counted_in_the_summary(tiny_teacher_dir, tiny_model_dir, tmp_path) -> None:
    corpus = write_corpus(tmp_path / "pairs.tsv")
    tight = train(
        tiny_config(tmp_path / "a", tiny_teacher_dir, tiny_model_dir, corpus, max_steps=5, grad_clip=1e-9)
    )
    assert tight.counts["clipped_steps"] == 5
    free = train(
        tiny_config(tmp_path / "b", tiny_teacher_dir, tiny_model_dir, corpus, max_steps=5, grad_clip=0)
    )
    assert free.counts["clipped_steps"] == 0
    log = json.loads((tight.output / "babelspace_training.json").read_text())
    assert log["counts"]["clipped_steps"] == 5


# ----------------------------------------------------------------------------- --batch-size auto
def test_auto_batch_halves_on_out_of_memory_until_a_batch_fits(monkeypatch) -> None:
    """accelerate's ``find_executable_batch_size`` does the retrying: torch's OutOfMemoryError and a
    RuntimeError worded as CUDA's are out-of-memory, the device cache is freed before each try, and
    anything else propagates; no fitting size at all is one TrainingError."""
    import accelerate.utils.memory as acc_memory

    freed = []
    monkeypatch.setattr(acc_memory, "clear_device_cache", lambda garbage_collection=False: freed.append(1))
    tried = []

    def try_batch(size: int) -> None:
        tried.append(size)
        if size > 1000:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        if size > 300:
            raise RuntimeError("CUDA error: out of memory. Tried to allocate 512.00 MiB")

    assert largest_fitting(try_batch, start=4096) == 256
    assert tried == [4096, 2048, 1024, 512, 256]
    assert len(freed) == 1 + 4  # once before the first try, then after each out-of-memory

    for other in (ValueError("not an OOM"), RuntimeError("shape mismatch")):

        def broken(size: int, exc: Exception = other) -> None:
            raise exc

        with pytest.raises(type(other), match=str(other)):
            largest_fitting(broken)

    def never(size: int) -> None:
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 8.00 MiB")

    with pytest.raises(TrainingError, match="not even one pair fits on the device"):
        largest_fitting(never, start=4)


def test_auto_batch_is_a_clear_error_without_gpu_memory() -> None:
    assert _cfg("--batch-size", "auto").batch_size == "auto"
    with pytest.raises(TrainingError, match="--batch-size auto .* give a number"):
        _device_module(torch.device("cpu"))
    with pytest.raises(TrainingError, match="--batch-size"):
        TrainConfig(batch_size="big")  # type: ignore[arg-type]


def test_auto_batch_probe_runs_the_objective_and_leaves_the_weights(
    tiny_teacher_dir, tiny_model_dir, monkeypatch
) -> None:
    """The probe itself on the CPU, its device module stood in for (the CPU reports no memory): it
    builds the run's objective, runs forward/backward at the first size, and changes no weight."""
    from types import SimpleNamespace

    from accelerate import Accelerator

    from babelspace.training import auto_batch
    from babelspace.training.setup.factory import build_student

    cfg = TrainConfig(teacher=str(tiny_teacher_dir), student=str(tiny_model_dir), max_seq_length=8)
    from sentence_transformers import SentenceTransformer

    teacher = SentenceTransformer(str(tiny_teacher_dir), device="cpu")
    student = build_student(cfg, teacher, cfg.objective_names, device="cpu")
    before = {k: v.clone() for k, v in student.state_dict().items()}
    calls = []
    fake = SimpleNamespace(synchronize=lambda: calls.append("sync"), empty_cache=lambda: None)
    monkeypatch.setattr(auto_batch, "_device_module", lambda device: fake)
    monkeypatch.setattr(auto_batch, "AUTO_START", 64)
    size = auto_batch.probe_batch_size(cfg, student, 48, Accelerator(cpu=True))
    assert size == 64 and calls == ["sync"]
    assert all(torch.equal(v, before[k]) for k, v in student.state_dict().items())
    assert all(p.grad is None for p in student.parameters())


def test_auto_batch_run_records_the_probed_size(
    tiny_teacher_dir, tiny_model_dir, tmp_path, monkeypatch
) -> None:
    """A whole run with ``--batch-size auto`` (the device module stood in for on the CPU, its
    synchronize running out of memory at the first two sizes): the probe halves 32 -> 16 -> 8
    through accelerate's retry, and the run trains with, and records, 8, not "auto"."""
    from types import SimpleNamespace

    from babelspace.training import auto_batch

    syncs = []

    def synchronize() -> None:
        syncs.append(1)
        if len(syncs) <= 2:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 1.00 GiB")

    fake = SimpleNamespace(synchronize=synchronize, empty_cache=lambda: None)
    monkeypatch.setattr(auto_batch, "_device_module", lambda device: fake)
    monkeypatch.setattr(auto_batch, "AUTO_START", 32)
    corpus = write_corpus(tmp_path / "pairs.tsv")
    res = train(
        tiny_config(tmp_path, tiny_teacher_dir, tiny_model_dir, corpus, batch_size="auto", max_steps=2)
    )
    assert len(syncs) == 3 and res.config.batch_size == 8 and res.steps == 2
    log = json.loads((res.output / "babelspace_training.json").read_text())
    assert log["config"]["batch_size"] == 8


# ----------------------------------------------------------------------------- recipes as regimes
def test_paper_presets_set_their_regime_flags() -> None:
    paper = _cfg("--recipe", "paper")
    assert paper.loss_reduction == "elementwise" and paper.grad_clip == 1.0
    assert paper.warmup_ratio == 0.1 and paper.schedule == "linear" and paper.model_from == "final"
    assert paper.epochs == 5.0 and paper.max_steps is None and paper.batch_size == 64
    assert paper.warmup_steps(1000) == 100
    assert _cfg("--recipe", "paper", "--epochs", "1").epochs == 1.0
    assert _cfg("--recipe", "paper", "--max-steps", "30").max_steps == 30
    mexma = _cfg("--recipe", "mexma-paper")
    assert (mexma.batch_size, mexma.grad_accum, mexma.pairs_per_step) == (150, 2, 300)
    assert mexma.sampling == "random" and mexma.epochs == 3.0 and mexma.max_steps is None
    assert mexma.schedule == "cosine" and mexma.head_ffn == 3072


def test_mexma_head_ffn_width_is_the_config_field(tiny_model_dir) -> None:
    from sentence_transformers import SentenceTransformer

    from babelspace.objectives.mexma import MexmaObjective, make_mexma_student

    student = make_mexma_student(SentenceTransformer(str(tiny_model_dir), device="cpu"))
    wide = MexmaObjective(student, head_layers=1, head_heads=2, head_ffn=72)
    assert wide.head.encoder.layers[0].linear1.out_features == 72
    default = MexmaObjective(student, head_layers=1, head_heads=2)
    assert default.head.encoder.layers[0].linear1.out_features == 4 * 32


def test_warnings_for_a_run_shorter_than_its_warmup_and_a_preset_off_its_paper() -> None:
    short = regime_warnings(TrainConfig(warmup=500), total_steps=120)
    assert len(short) == 1 and "warm-up (500 steps) is longer than the run (120 steps)" in short[0]
    assert regime_warnings(TrainConfig(warmup=10), total_steps=120) == []
    paper = regime_warnings(_cfg("--recipe", "paper"), total_steps=50_000)
    assert len(paper) == 1 and "student e5-small (paper: xlm-roberta-base)" in paper[0]
    same = regime_warnings(
        _cfg(
            "--recipe",
            "paper",
            "--teacher",
            "sentence-transformers/paraphrase-distilroberta-base-v2",
            "--student",
            "FacebookAI/xlm-roberta-base",
        ),
        total_steps=50_000,
    )
    assert "teacher" not in same[0] and "student" not in same[0] and "data bible" in same[0]


def test_warmup_warning_is_written_in_the_run_log(tiny_teacher_dir, tiny_model_dir, tmp_path) -> None:
    corpus = write_corpus(tmp_path / "pairs.tsv")
    res = train(tiny_config(tmp_path, tiny_teacher_dir, tiny_model_dir, corpus, max_steps=3, warmup=50))
    log = json.loads((res.output / "babelspace_training.json").read_text())
    assert len(log["warnings"]) == 1 and "longer than the run (3 steps)" in log["warnings"][0]


def test_auto_batch_on_a_device_without_memory_is_refused_before_models_load(monkeypatch, tmp_path) -> None:
    """``--batch-size auto`` on the CPU is one TrainingError before any model or data loads."""
    from babelspace.errors import TrainingError
    from babelspace.training import trainer as tr

    def no_load(*_a, **_k):
        raise AssertionError("a model was loaded")

    monkeypatch.setattr(tr, "load_encoder", no_load)
    cfg = TrainConfig(batch_size="auto", device="cpu", output=tmp_path / "out", test_sentences=0)
    with pytest.raises(TrainingError, match="--batch-size auto probes GPU memory"):
        tr.train(cfg)
