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

import logging
import math
import signal
import time
from pathlib import Path
from typing import Any

import torch
from sentence_transformers import SentenceTransformer

from babelspace.encoder import load_encoder
from babelspace.errors import TrainingError
from babelspace.progress import Progress as ProgressBar
from babelspace.training import checkpoint as ckpt
from babelspace.training.config import TrainConfig
from babelspace.training.corpora import data_mix
from babelspace.training.dev import evaluate_dev, format_metrics
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
from babelspace.training.output_map import OutputMap
from babelspace.training.phases import (
    DataPlan,
    TeacherTargets,
    fit_student_projection,
    freeze,
    make_optimizer,
    prepare_data,
    teacher_targets,
)
from babelspace.training.result import TrainResult, train_result, write_run_log
from babelspace.training.run_state import (
    Progress,
    RunParts,
    checkpoint_state,
    count_nonfinite,
    find_checkpoint,
    restore_progress,
    set_seed,
)
from babelspace.training.sharded import FullStudent, check_sharding

logger = logging.getLogger(__name__)


class TrainingInterrupted(TrainingError):
    """The run stopped on SIGTERM/SIGINT after writing a checkpoint."""


class Trainer:
    """One run: `run` (device, threads, output folder) -> `_run` (the phases) -> `_train` (the
    steps) -> `_finish`. What a checkpoint holds and restores is in
    :mod:`~babelspace.training.run_state`; the result and run log in :mod:`~babelspace.training.result`."""

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
        self.sharded = check_sharding(self.acc)
        teacher, student = self._load_models()
        plan = prepare_data(cfg, student, self.acc.num_processes)
        resumed, self.run_id, self.forced_changes = find_checkpoint(cfg, plan)
        targets = TeacherTargets()
        if teacher is not None:
            targets = teacher_targets(cfg, teacher, plan, self.acc)
        self._tick("teacher_encoding")
        untrained = None
        if teacher is not None and resumed is None and self._main:
            untrained = self._evaluate(student, plan, targets)
            logger.info("untrained dev: %s", format_metrics(untrained))
        if resumed is None and fit_student_projection(student, targets, cfg) is not None:
            self._tick("projection_fit")
        freeze(student, cfg)  # before the objective: MEXMA unties its head's output from frozen embeddings
        objective = build_objective(
            cfg, student, targets.cache, targets.shift, targets.bank, plan.train.pairs, targets.radius
        )
        params = [p for p in objective.parameters() if p.requires_grad]
        optimizer, scheduler = make_optimizer(params, cfg, plan.total_steps)
        self.full = FullStudent(objective, student, self._main) if self.sharded else None
        model, optimizer = self.acc.prepare(objective, optimizer)
        if self.sharded:  # the shards replace the student's parameters; accelerate clips them all
            params = list(model.parameters())
        self.parts = RunParts(student, objective, model, optimizer, scheduler, params, plan, targets)
        if resumed is not None:
            progress = restore_progress(self.parts, resumed, self.acc.scaler, sharded=self.sharded)
        else:
            progress = self._start(untrained)
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

    def _whole_student(self) -> SentenceTransformer | None:
        """The student with all its weights, for dev evaluation and export: itself, or under FSDP the
        main process's copy refreshed from the shards (a gather: every rank calls this; the other
        ranks get None)."""
        if self.full is None:
            return self.parts.student
        return self.full.refresh(self.parts.model)

    def _evaluate(
        self, student: SentenceTransformer, plan: DataPlan, targets: TeacherTargets
    ) -> dict[str, float]:
        return evaluate_dev(
            student, plan.dev.pairs, targets.dev_vectors, output_map=self._output_map(targets)
        )

    # ------------------------------------------------------------------ checkpoints
    def _start(self, untrained: dict[str, float] | None) -> Progress:
        progress = Progress(history=[{"step": 0, "stage": "untrained", **untrained}] if untrained else [])
        student = self._whole_student()
        if self._main:
            progress.best = self._evaluate(student, self.parts.plan, self.parts.targets)
            progress.history.append({"step": 0, **progress.best})
            self._export({"step": 0, **progress.best}, student)
            logger.info("step 0 dev: %s", format_metrics(progress.best))
        return progress

    def _export(self, info: dict[str, Any], student: SentenceTransformer) -> None:
        export_student(student, self.cfg, info, output_map=self._output_map(self.parts.targets))

    def _output_map(self, targets: TeacherTargets) -> OutputMap:
        """What the exported model applies to the student's (centred-space) output: the teacher's
        mean added back, after giving the centred part the teacher's norm (``--export-space
        teacher``, a drop-in for the teacher; ``--export-norm``), or nothing (``centred``)."""
        if self.cfg.export_space != "teacher":
            return OutputMap()
        return OutputMap(shift=targets.shift, radius=targets.radius)

    def _checkpoint(self, progress: Progress) -> None:
        """Write a checkpoint from the main process (under FSDP every rank takes part in gathering
        the full state, so every rank calls this)."""
        if not (self._main or self.sharded):
            return
        state = checkpoint_state(self.parts, progress, self.cfg, self.acc.scaler, self.run_id, self.sharded)
        if self._main:
            ckpt.save_checkpoint(self.cfg.output, progress.step, state, keep_last=self.cfg.keep_last)

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
                if progress.step % cfg.eval_every == 0 or progress.step == total:
                    student = self._whole_student()
                    if self._main:
                        postfix.update(self._dev_check(progress, out, student))
                bar.set_postfix(postfix)
                if (cfg.save_every and progress.step % cfg.save_every == 0) or self._stop_signal:
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
            count_nonfinite(progress, loss, pairs, cfg)
            p.optimizer.zero_grad(set_to_none=True)
        p.scheduler.step()
        progress.step += 1
        progress.pairs_seen += len(global_batch)
        progress.train_time += time.perf_counter() - t0
        return out

    def _dev_check(
        self, progress: Progress, out: dict[str, torch.Tensor], student: SentenceTransformer
    ) -> dict[str, str]:
        t0 = time.perf_counter()
        p = self.parts
        metrics = self._evaluate(student, p.plan, p.targets)
        loss = out["loss"].item()
        progress.history.append(
            {"step": progress.step, "loss": loss, **{k: float(v.detach()) for k, v in out.items()}, **metrics}
        )
        logger.info("step %d loss %.4f dev: %s", progress.step, loss, format_metrics(metrics))
        if metrics["dev_score"] > progress.best["dev_score"]:
            progress.best, progress.best_step = metrics, progress.step
            self._export({"step": progress.step, **metrics}, student)
        self.timings["evaluation"] = self.timings.get("evaluation", 0.0) + time.perf_counter() - t0
        postfix = {"dev_acc": f"{metrics['dev_score']:.1f}"}
        if "dev_mse" in metrics:
            postfix["dev_mse"] = f"{metrics['dev_mse']:.3f}"
        return postfix

    # ------------------------------------------------------------------ the end
    def _finish(self, progress: Progress, interrupted: bool) -> TrainResult:
        cfg, plan = self.cfg, self.parts.plan
        if cfg.save_every and not interrupted and progress.step % cfg.save_every:
            self._checkpoint(progress)
        if cfg.export == "final" and not interrupted:
            student = self._whole_student()
            if self._main:
                self._export({"step": progress.step, **progress.history[-1]}, student)
            progress.best_step = progress.step
        self.timings["training"] = progress.train_time
        result = train_result(cfg, plan, progress, self.timings, interrupted)
        if self._main:
            extra = {"forced_resume_changes": self.forced_changes} if self.forced_changes else {}
            write_run_log(
                Path(cfg.output), cfg, result, str(self.acc.device), self.acc.mixed_precision, extra
            )
        return result


def train(cfg: TrainConfig) -> TrainResult:
    """Run one training job described by ``cfg`` (see :class:`TrainConfig`)."""
    return Trainer(cfg).run()
