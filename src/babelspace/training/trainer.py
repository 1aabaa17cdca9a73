"""The training loop shared by every objective.

A run is a short sequence of named phases (:meth:`Trainer.run`): load the models on the run's
device -> plan the data (:mod:`~babelspace.training.phases`) -> teacher targets -> closed-form
projection fit -> objective, optimizer and schedule, prepared by `accelerate` (device, mixed
precision, DDP) -> restore a checkpoint -> steps -> finish (export, run log). Each step:
objective.collate -> objective(batch) under autocast -> backward (scaled in fp16) -> clip -> AdamW ->
schedule, with a progress bar, periodic dev evaluation and the best model (by dev score) exported to
``output`` as a sentence-transformers folder.
"""

from __future__ import annotations

import json
import logging
import math
import random
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from sentence_transformers import SentenceTransformer

from babelspace.encoder import load_encoder
from babelspace.errors import TrainingError
from babelspace.progress import Progress as ProgressBar
from babelspace.training import checkpoint as ckpt
from babelspace.training.config import TrainConfig
from babelspace.training.corpora import data_mix
from babelspace.training.dev import evaluate_dev
from babelspace.training.distributed import (
    make_accelerator,
    release_accelerator,
    resolve_device,
    resolve_precision,
    torch_threads,
)
from babelspace.training.export import export_student
from babelspace.training.factory import build_objective, build_student
from babelspace.training.output import cleanup_failed_output, prepare_output
from babelspace.training.phases import (
    DataPlan,
    TeacherTargets,
    fit_student_projection,
    freeze,
    make_optimizer,
    prepare_data,
    teacher_targets,
)

logger = logging.getLogger(__name__)


@dataclass
class TrainResult:
    output: Path
    steps: int
    best_step: int
    best_dev: dict[str, float]
    history: list[dict[str, float]] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    pairs_per_second: float = 0.0
    data_report: list[str] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    interrupted: bool = False
    device: str = ""
    precision: str = ""
    peak_device_memory_mb: float | None = None  # on a GPU: peak memory allocated by torch


@dataclass
class Progress:
    """What changes from step to step besides the weights (checkpointed)."""

    step: int = 0
    history: list[dict[str, float]] = field(default_factory=list)
    best: dict[str, float] = field(default_factory=lambda: {"dev_score": float("-inf")})
    best_step: int = 0
    skipped_nonfinite: int = 0
    skipped_by_scaler: int = 0
    pairs_seen: int = 0
    train_time: float = 0.0


class TrainingInterrupted(TrainingError):
    """The run stopped on SIGTERM/SIGINT after writing a checkpoint."""


def check_resume(state: dict[str, Any], fingerprint: str, cfg: TrainConfig) -> list[str]:
    """Refuse to resume a checkpoint whose corpus or trajectory settings differ from this run's
    (each changed flag named); with ``--force-resume`` return the differences for the run log."""
    if state.get("objective_name") != cfg.objective:
        raise TrainingError(
            f"checkpoint was written by objective {state.get('objective_name')!r}, not {cfg.objective!r}"
        )
    changes = ckpt.config_changes(state.get("config") or {}, cfg.to_dict())
    if state.get("fingerprint") != fingerprint:
        old = str(state.get("fingerprint", "?"))[:12]
        changes.insert(
            0, f"training corpus changed since the checkpoint was written ({old} -> {fingerprint[:12]})"
        )
    if changes and not cfg.force_resume:
        raise TrainingError(
            "refusing to resume: " + "; ".join(changes) + ". Restore these settings or the data, use a new "
            "--output, or pass --force-resume (the differences are recorded in the run log)"
        )
    for change in changes:
        logger.warning("--force-resume: %s", change)
    return changes


def set_seed(seed: int) -> None:
    """Seed Python, NumPy and torch: dropout and masking draw from the global generators, whose
    states every checkpoint stores, so a resumed run continues the same random streams."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


class Trainer:
    def __init__(self, cfg: TrainConfig) -> None:
        self.cfg = cfg
        self.timings: dict[str, float] = {}
        self._stop_signal: int | None = None
        self._t = time.perf_counter()
        self.forced_changes: list[str] = []

    # ------------------------------------------------------------------ the phases
    def run(self) -> TrainResult:
        cfg = self.cfg
        device = resolve_device(cfg.device)
        precision = resolve_precision(cfg.precision, device)
        data_mix(cfg.data)  # a malformed --data spec fails here, before any model is loaded
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
        with torch_threads(cfg.threads):
            set_seed(cfg.seed)
            self.acc = make_accelerator(device, precision)
            if self._main:
                prepare_output(cfg.output, resume=cfg.resume, overwrite=cfg.overwrite)
            try:
                result = self._run()
            except BaseException:
                if self._main:
                    cleanup_failed_output(cfg.output)
                release_accelerator(failed=True)
                raise
            release_accelerator()
        result.device, result.precision = str(device), precision
        if device.type == "cuda":
            result.peak_device_memory_mb = torch.cuda.max_memory_allocated(device) / 2**20
        if result.interrupted:
            raise TrainingInterrupted(
                f"stopped at step {result.steps} by signal {self._stop_signal}; resume with --resume"
            )
        return result

    def _run(self) -> TrainResult:
        cfg = self.cfg
        _refuse_sharded(self.acc)
        teacher, student = self._load_models()
        plan = prepare_data(cfg, student, self.acc.num_processes)
        resumed = self._find_checkpoint(plan)
        targets = TeacherTargets()
        if teacher is not None:
            targets = teacher_targets(cfg, teacher, plan, self.acc)
        self._tick("teacher_encoding")
        untrained = None
        if teacher is not None and resumed is None and self._main:
            untrained = self._evaluate(student, plan, targets)
            logger.info("untrained dev: %s", _fmt(untrained))
        if resumed is None and fit_student_projection(student, targets, cfg) is not None:
            self._tick("projection_fit")
        freeze(student, cfg)  # before the objective: MEXMA unties its head's output from frozen embeddings
        objective = build_objective(
            cfg, student, targets.cache, targets.shift, targets.bank, plan.train.pairs
        )
        params = [p for p in objective.parameters() if p.requires_grad]
        optimizer, scheduler = make_optimizer(params, cfg, plan.total_steps)
        model, optimizer = self.acc.prepare(objective, optimizer)
        self.parts = _Parts(student, objective, model, optimizer, scheduler, params, plan, targets)
        progress = self._restore(resumed) if resumed is not None else self._start(untrained)
        self._tick("evaluation")
        interrupted = self._train(progress)
        return self._finish(progress, interrupted)

    @property
    def _main(self) -> bool:
        return self.acc.is_main_process

    def _tick(self, name: str) -> None:
        now = time.perf_counter()
        self.timings[name] = self.timings.get(name, 0.0) + now - self._t
        self._t = now

    def _load_models(self) -> tuple[SentenceTransformer | None, SentenceTransformer]:
        cfg = self.cfg
        device = str(self.acc.device)
        teacher = None
        if "distill" in cfg.objective_names:
            teacher = load_encoder(cfg.teacher, device=device, max_seq_length=cfg.max_seq_length)
            teacher.eval()
        student = build_student(cfg, teacher, cfg.objective_names, device=device)
        self._tick("setup")
        return teacher, student

    def _evaluate(
        self, student: SentenceTransformer, plan: DataPlan, targets: TeacherTargets
    ) -> dict[str, float]:
        return evaluate_dev(
            student, plan.dev.pairs, targets.dev_vectors, output_shift=self._output_shift(targets)
        )

    # ------------------------------------------------------------------ checkpoints
    def _find_checkpoint(self, plan: DataPlan) -> tuple[Path, dict[str, Any]] | None:
        cfg = self.cfg
        if not cfg.resume:
            self.run_id = ckpt.new_run_id()
            return None
        # the newest run's newest checkpoint (not the highest step of any run in the folder)
        resumed = ckpt.load_latest(cfg.output, run_id=ckpt.latest_run_id(cfg.output))
        if resumed is None:
            logger.warning("--resume: no checkpoint in %s, starting from scratch", cfg.output)
            self.run_id = ckpt.new_run_id()
            return None
        state = resumed[1]
        self.forced_changes = check_resume(state, plan.fingerprint, cfg)
        plan.sampler.load_state_dict(state["sampler"])
        self.run_id = state.get("run_id") or ckpt.new_run_id()
        return resumed

    def _state(self, progress: Progress) -> dict[str, Any]:
        p, cfg = self.parts, self.cfg
        return {
            "objective": p.objective.state_dict(),
            "objective_name": cfg.objective,
            "optimizer": p.optimizer.state_dict(),
            "scheduler": p.scheduler.state_dict(),
            "scaler": self.acc.scaler.state_dict() if self.acc.scaler is not None else None,
            "sampler": p.plan.sampler.state_dict(batches_done=progress.step),
            "rng": ckpt.rng_state(),
            "step": progress.step,
            "history": progress.history,
            "best": progress.best,
            "best_step": progress.best_step,
            "skipped_nonfinite": progress.skipped_nonfinite,
            "skipped_by_scaler": progress.skipped_by_scaler,
            "fingerprint": p.plan.fingerprint,
            "run_id": self.run_id,
            "config": cfg.to_dict(),
        }

    def _restore(self, resumed: tuple[Path, dict[str, Any]]) -> Progress:
        path, state = resumed
        p = self.parts
        p.objective.load_state_dict(state["objective"])
        p.optimizer.load_state_dict(state["optimizer"])
        p.scheduler.load_state_dict(state["scheduler"])
        if self.acc.scaler is not None and state.get("scaler"):
            self.acc.scaler.load_state_dict(state["scaler"])
        ckpt.set_rng_state(state["rng"])
        progress = Progress(
            step=state["step"],
            history=state["history"],
            best=state["best"],
            best_step=state["best_step"],
            skipped_nonfinite=state.get("skipped_nonfinite", 0),
            skipped_by_scaler=state.get("skipped_by_scaler", 0),
        )
        logger.info("resumed from %s (step %d of %d)", path, progress.step, p.plan.total_steps)
        return progress

    def _start(self, untrained: dict[str, float] | None) -> Progress:
        progress = Progress(history=[{"step": 0, "stage": "untrained", **untrained}] if untrained else [])
        if self._main:
            progress.best = self._evaluate(self.parts.student, self.parts.plan, self.parts.targets)
            progress.history.append({"step": 0, **progress.best})
            self._export({"step": 0, **progress.best})
            logger.info("step 0 dev: %s", _fmt(progress.best))
        return progress

    def _export(self, info: dict[str, Any]) -> None:
        export_student(
            self.parts.student, self.cfg, info, output_shift=self._output_shift(self.parts.targets)
        )

    def _output_shift(self, targets: TeacherTargets):
        """What the exported model adds to the student's (centred-space) output: the teacher's mean
        (``--export-space teacher``, a drop-in for the teacher) or nothing (``centred``)."""
        return targets.shift if self.cfg.export_space == "teacher" else None

    def _checkpoint(self, progress: Progress) -> None:
        ckpt.save_checkpoint(
            self.cfg.output, progress.step, self._state(progress), keep_last=self.cfg.keep_last
        )

    # ------------------------------------------------------------------ the loop
    def _on_signal(self, signum: int, _frame: object) -> None:
        logger.warning("received signal %d: saving a checkpoint after this step, then stopping", signum)
        self._stop_signal = signum

    def _train(self, progress: Progress) -> bool:
        """Steps until the plan ends or a signal asks to stop (returns True then)."""
        cfg, total = self.cfg, self.parts.plan.total_steps
        previous = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
        for sig in previous:
            signal.signal(sig, self._on_signal)
        self.parts.student.train()
        bar = ProgressBar(total=total, initial=progress.step, desc="train", unit="step")
        try:
            while progress.step < total:
                out = self._step(progress)
                bar.update(1)
                postfix = {
                    "loss": f"{out['loss'].item():.4f}",
                    "pairs/s": f"{progress.pairs_seen / progress.train_time:.1f}",
                }
                if self._main and (progress.step % cfg.eval_every == 0 or progress.step == total):
                    postfix.update(self._dev_check(progress, out))
                bar.set_postfix(postfix)
                if self._main and (
                    (cfg.save_every and progress.step % cfg.save_every == 0) or self._stop_signal
                ):
                    self._checkpoint(progress)
                if self._stop_signal is not None:
                    return True
        finally:
            bar.close()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        return False

    def _step(self, progress: Progress) -> dict[str, torch.Tensor]:
        """One optimizer step on this process's share of the planned global batch (DDP averages the
        gradients, which equals one process on the whole batch for mean losses)."""
        p, cfg, acc = self.parts, self.cfg, self.acc
        t0 = time.perf_counter()
        global_batch = p.plan.planned[progress.step]
        pairs = [p.plan.train.pairs[i] for i in global_batch[acc.process_index :: acc.num_processes]]
        with acc.autocast():
            out = p.model(p.objective.collate(pairs))
        loss = out["loss"]
        p.optimizer.zero_grad(set_to_none=True)
        finite = bool(torch.isfinite(loss))
        grad_norm = float("nan")
        if finite:
            acc.backward(loss)
            grad_norm = float(acc.clip_grad_norm_(p.params, cfg.grad_clip or float("inf")))
            finite = math.isfinite(grad_norm)
        if finite or (acc.scaler is not None and torch.isfinite(loss)):
            # fp16: an overflowing gradient is the loss scaler's business (it skips and backs off)
            p.optimizer.step()
            if acc.optimizer_step_was_skipped:
                progress.skipped_by_scaler += 1
        else:
            self._skip_nonfinite(progress, loss, pairs)
        p.scheduler.step()
        progress.step += 1
        progress.pairs_seen += len(global_batch)
        progress.train_time += time.perf_counter() - t0
        return out

    def _skip_nonfinite(self, progress: Progress, loss: torch.Tensor, pairs: list) -> None:
        what = "loss" if not torch.isfinite(loss) else "gradient"
        where = ", ".join(p.origin for p in pairs[:8]) + (" ..." if len(pairs) > 8 else "")
        if progress.skipped_nonfinite >= self.cfg.skip_nonfinite:
            raise TrainingError(
                f"non-finite {what} at step {progress.step + 1}; batch sources: {where}. The last good "
                f"checkpoint in {ckpt.checkpoint_root(self.cfg.output)} is intact (resume with --resume; "
                "--skip-nonfinite N skips up to N such batches)"
            )
        progress.skipped_nonfinite += 1
        logger.warning("skipping batch at step %d: non-finite %s (%s)", progress.step + 1, what, where)
        self.parts.optimizer.zero_grad(set_to_none=True)

    def _dev_check(self, progress: Progress, out: dict[str, torch.Tensor]) -> dict[str, str]:
        t0 = time.perf_counter()
        p = self.parts
        metrics = self._evaluate(p.student, p.plan, p.targets)
        loss = out["loss"].item()
        progress.history.append(
            {"step": progress.step, "loss": loss, **{k: float(v.detach()) for k, v in out.items()}, **metrics}
        )
        logger.info("step %d loss %.4f dev: %s", progress.step, loss, _fmt(metrics))
        if metrics["dev_score"] > progress.best["dev_score"]:
            progress.best, progress.best_step = metrics, progress.step
            self._export({"step": progress.step, **metrics})
        self.timings["evaluation"] = self.timings.get("evaluation", 0.0) + time.perf_counter() - t0
        postfix = {"dev_acc": f"{metrics['dev_score']:.1f}"}
        if "dev_mse" in metrics:
            postfix["dev_mse"] = f"{metrics['dev_mse']:.3f}"
        return postfix

    # ------------------------------------------------------------------ the end
    def _finish(self, progress: Progress, interrupted: bool) -> TrainResult:
        cfg, plan = self.cfg, self.parts.plan
        if self._main and cfg.save_every and not interrupted and progress.step % cfg.save_every:
            self._checkpoint(progress)
        if self._main and cfg.export == "final" and not interrupted:
            self._export({"step": progress.step, **progress.history[-1]})
            progress.best_step = progress.step
        self.timings["training"] = progress.train_time
        counts = {
            **plan.counts,
            **{
                f"skipped_lines_{reason.replace(' ', '_')}": n
                for reason, n in plan.train.report.skipped.items()
            },
            "skipped_nonfinite": progress.skipped_nonfinite,
            "skipped_by_scaler": progress.skipped_by_scaler,
        }
        result = TrainResult(
            output=Path(cfg.output),
            steps=progress.step,
            best_step=progress.best_step,
            best_dev=progress.best,
            history=progress.history,
            timings=dict(self.timings),
            pairs_per_second=progress.pairs_seen / progress.train_time if progress.train_time else 0.0,
            data_report=[plan.train.report.summary()],
            counts=counts,
            interrupted=interrupted,
        )
        if self._main:
            extra = {"forced_resume_changes": self.forced_changes} if self.forced_changes else {}
            _write_log(Path(cfg.output), cfg, result, str(self.acc.device), self.acc.mixed_precision, extra)
        return result


@dataclass
class _Parts:
    """The objects one run trains with (built by the phases before the loop)."""

    student: SentenceTransformer
    objective: torch.nn.Module
    model: torch.nn.Module  # the objective as prepared by accelerate (DDP-wrapped under torchrun)
    optimizer: Any
    scheduler: Any
    params: list[torch.nn.Parameter]
    plan: DataPlan
    targets: TeacherTargets


def _write_log(
    output: Path, cfg: TrainConfig, result: TrainResult, device: str, precision: str, extra: dict[str, Any]
) -> None:
    log = {
        **extra,
        "config": cfg.to_dict(),
        "device": device,
        "precision": precision,
        "history": result.history,
        "best_step": result.best_step,
        "counts": result.counts,
    }
    (output / "babelspace_training.json").write_text(json.dumps(log, indent=2))


def _refuse_sharded(accelerator) -> None:
    """FSDP / DeepSpeed shard the student across processes, but dev evaluation and export run on
    the main process alone (they would wait for the other shards forever): refuse up front."""
    kind = str(accelerator.distributed_type)
    if "FSDP" in kind or "DEEPSPEED" in kind:
        raise TrainingError(
            f"accelerate is configured for {kind}: sharded training is not supported yet (dev evaluation and "
            "export run on the main process only). Use DDP (torchrun / accelerate launch without an FSDP or "
            "DeepSpeed config); see docs/training.md"
        )


def _fmt(metrics: dict[str, float]) -> str:
    return ", ".join(f"{k}={v:.3f}" for k, v in metrics.items())


def train(cfg: TrainConfig) -> TrainResult:
    """Run one training job described by ``cfg`` (see :class:`TrainConfig`)."""
    return Trainer(cfg).run()
