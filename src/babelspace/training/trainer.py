"""The training loop shared by every objective.

A run is a short sequence of named phases (:meth:`Trainer.run`): load the models on the run's
device (and probe ``--batch-size auto``) -> plan the data (:mod:`~babelspace.training.setup.phases`) ->
teacher targets -> closed-form projection fit -> objective, optimizer and schedule, prepared by
`accelerate` (device, mixed precision, DDP) -> restore a checkpoint -> steps -> finish (export, run
log). Each step: ``--grad-accum`` x [objective.collate -> objective(batch) under autocast ->
backward (scaled in fp16)] -> clip -> AdamW (skipped on the device when not finite) -> schedule,
with no host sync (:mod:`~babelspace.training.step_guard`); every ``--log-every`` steps the progress
bar, periodic dev evaluation and the best model (by dev score) exported to ``output`` as a
sentence-transformers folder.
"""

from __future__ import annotations

import logging
import signal
import time
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch
from sentence_transformers import SentenceTransformer

from babelspace.checkpoints import checkpoint as ckpt
from babelspace.device import resolve_device, resolve_precision
from babelspace.errors import TrainingError
from babelspace.evaluation.dev import evaluate_dev, format_metrics
from babelspace.models.encoder import load_encoder
from babelspace.progress import Progress
from babelspace.resources import cache_dir, writable_cache_dir
from babelspace.training.auto_batch import check_auto_batch_device, probe_batch_size
from babelspace.training.batches import dead_worker, loader_workers, step_batches
from babelspace.training.collective import (
    StopAgreement,
    check_batch_per_process,
    gather_rng_states,
    is_collective_failure,
    rank_failure,
)
from babelspace.training.config import TrainConfig
from babelspace.training.distributed import make_accelerator, release_accelerator, torch_threads
from babelspace.training.output.export import export_output_map, export_student
from babelspace.training.output.folder import (
    check_output_apart_from_inputs,
    cleanup_failed_output,
    interrupted_note,
    prepare_output,
)
from babelspace.training.output.lock import output_lock
from babelspace.training.output.run_log import TrainResult, train_result, write_run_log
from babelspace.training.regimes import regime_warnings
from babelspace.training.setup.corpora import data_mix, mix_names
from babelspace.training.setup.factory import build_objective, build_student
from babelspace.training.setup.phases import (
    DataPlan,
    TeacherTargets,
    fit_student_projection,
    freeze,
    make_optimizer,
    prepare_data,
    split_head_params,
    teacher_targets,
)
from babelspace.training.setup.token_plan import train_tokens
from babelspace.training.sharded import FullStudent, check_sharding
from babelspace.training.state.run_state import (
    RunParts,
    RunState,
    checkpoint_state,
    count_nonfinite,
    find_checkpoint,
    restore_run_state,
    set_seed,
    write_checkpoint,
)
from babelspace.training.step_guard import StepGuard
from babelspace.training.trackers import check_tracker, start_tracking, tracker_kwargs

logger = logging.getLogger(__name__)


class TrainingInterrupted(TrainingError):
    """The run stopped on SIGTERM/SIGINT after writing a checkpoint."""


class Trainer:
    """One run: `run` (device, threads, output folder) -> `_run` (the phases) -> `_train` (the
    steps) -> `_finish`. What a checkpoint holds and restores is in
    :mod:`~babelspace.training.state.run_state`; the result and run log in :mod:`~babelspace.training.output.run_log`."""

    def __init__(self, cfg: TrainConfig) -> None:
        self.cfg = cfg
        self.timings: dict[str, float] = {}
        self._stop_signal: int | None = None
        self._t = time.perf_counter()
        self.forced_changes: list[str] = []
        self.warnings: list[str] = []  # regime warnings (`regime_warnings`), also in the run log
        # the saved model's max_seq_length: --max-seq-length, else the base model's own
        self.saved_seq_length: int | None = cfg.max_seq_length

    # ------------------------------------------------------------------ the phases
    def run(self) -> TrainResult:
        cfg = self.cfg
        device = resolve_device(cfg.device)
        precision = resolve_precision(cfg.precision, device)
        if cfg.batch_size == "auto":  # refused here, before any model loads, where it cannot work
            check_auto_batch_device(device)
        check_tracker(cfg.report_to)  # a missing tracker package: one line, before any work
        data_mix(cfg.data)  # a malformed --data spec fails here, before any model is loaded
        check_output_apart_from_inputs(cfg)  # --out never over --data, --teacher or --student
        if "distill" in cfg.objective_names or (cfg.test_sentences and "bible" in mix_names(cfg.data)):
            # teacher vectors and the held-out table's baselines are cached: fail now, not after work
            writable_cache_dir(cfg.cache_dir, "--cache-dir" if cfg.cache_dir else None)
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
        with torch_threads(cfg.threads), ExitStack() as held:
            set_seed(cfg.seed)
            self.acc = make_accelerator(device, precision, **tracker_kwargs(cfg))
            self.acc.gradient_accumulation_steps = cfg.grad_accum
            if self._main:  # one run per --out; released when the run ends, however it ends
                held.enter_context(output_lock(cfg.output))
                prepare_output(cfg.output, resume=cfg.resume, overwrite=cfg.overwrite)
            # accelerate forgets the rank once released
            is_main, rank, world = self._main, self.acc.process_index, self.acc.num_processes
            try:
                result = self._run()
            except BaseException as exc:
                if is_main:
                    cleanup_failed_output(cfg.output)
                    if isinstance(exc, KeyboardInterrupt):  # Ctrl-C or SIGTERM outside the step loop
                        exc.add_note(interrupted_note(cfg.output))
                # asks the rendezvous store which ranks are gone: before the group is released
                failure = rank_failure(exc, rank, world) if world > 1 and is_collective_failure(exc) else None
                release_accelerator(self.acc, failed=True)
                if failure is not None:
                    raise failure from None
                raise
            release_accelerator(self.acc)
        result.device, result.precision, result.is_main = str(device), precision, is_main
        if device.type == "cuda":
            result.peak_device_memory_mb = torch.cuda.max_memory_allocated(device) / 2**20
        if result.interrupted:
            why = (
                f"signal {self._stop_signal}" if self._stop_signal is not None else "a signal to another rank"
            )
            raise TrainingInterrupted(f"stopped at step {result.steps} by {why}; resume with --resume")
        return result

    def _run(self) -> TrainResult:
        cfg = self.cfg
        if cfg.batch_size != "auto":  # before any model loads; "auto" is checked once resolved
            check_batch_per_process(cfg.batch_size, self.acc.num_processes)
        self.agreement = StopAgreement()  # collective: every rank builds it
        self.sharded = check_sharding(self.acc)
        teacher, student = self._load_models()
        if cfg.batch_size == "auto":
            cfg = self.cfg = self._auto_batch_size(teacher, student)
        plan = prepare_data(cfg, student, self.acc.num_processes)
        self.warnings = regime_warnings(cfg, plan.total_steps)
        for line in self.warnings:
            logger.warning("%s", line)
        resumed, self.run_id, self.forced_changes = find_checkpoint(cfg, plan)
        targets = TeacherTargets()
        if teacher is not None:
            targets = teacher_targets(cfg, teacher, plan, self.acc)
        self.output_map = export_output_map(cfg, targets)  # what dev evaluation and export apply
        self._tick("teacher_encoding")
        untrained = None
        if teacher is not None and resumed is None and self._main:
            untrained = self._evaluate(student, plan, targets)
            logger.info("untrained dev: %s", format_metrics(untrained) or "no dev set (--dev-pairs 0)")
        if resumed is None and fit_student_projection(student, targets, cfg) is not None:
            self._tick("projection_fit")
        freeze(student, cfg)  # before the objective: MEXMA unties its head's output from frozen embeddings
        objective = build_objective(cfg, student, targets, plan.train.pairs)
        cache = Path(cfg.cache_dir or cache_dir())
        self.tokens = train_tokens(
            plan.train, plan.total_steps * cfg.pairs_per_step, objective, cfg.token_cache, cache
        )
        params, head_params = split_head_params(objective, student, cfg)
        optimizer, scheduler = make_optimizer(params, cfg, plan.total_steps, head_params)
        params = params + (head_params or [])
        self.full = FullStudent(objective, student, self._main) if self.sharded else None
        if self.sharded:  # checkpoints hold the full state, gathered by babelspace (sharded.py)
            model, optimizer = self.acc.prepare(objective, optimizer)
            params = list(model.parameters())  # the shards replace the student's; accelerate clips them all
        else:  # the schedule too, for save_state/load_state (stepped as is: no step_scheduler_with_optimizer)
            model, optimizer, scheduler = self.acc.prepare(objective, optimizer, scheduler)
        self.parts = RunParts(student, objective, model, optimizer, scheduler, params, plan, targets)
        self.guard = StepGuard(
            cfg.grad_clip or float("inf"), scaler_owns_gradients=self.acc.scaler is not None
        )
        if resumed is not None:
            run_state = restore_run_state(self.parts, resumed, self.acc, sharded=self.sharded)
        else:
            run_state = self._start(untrained)
        start_tracking(self.acc, cfg, run_state.best if resumed is None else None)
        self._tick("evaluation")
        interrupted = self._train(run_state)
        return self._finish(run_state, interrupted)

    def _auto_batch_size(
        self, teacher: SentenceTransformer | None, student: SentenceTransformer
    ) -> TrainConfig:
        """``--batch-size auto`` resolved by a probe on the device (`probe_batch_size`)."""
        freeze(student, self.cfg)  # what trains decides what the probe's backward allocates
        dim = teacher.get_sentence_embedding_dimension() if teacher is not None else None
        size = probe_batch_size(self.cfg, student, dim, self.acc)
        return replace(self.cfg, batch_size=size)

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
            teacher = load_encoder(cfg.teacher, device=device, max_seq_length=cfg.train_seq_length)
            teacher.eval()
        student = build_student(cfg, teacher, cfg.objective_names, device=device)
        self.saved_seq_length = student.max_seq_length  # the base model's own unless the user set one
        student.max_seq_length = cfg.train_seq_length
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
        """The dev metrics; none (``{}``) for a run without a dev set (``--dev-pairs 0``)."""
        if not len(plan.dev):
            return {}
        return evaluate_dev(student, plan.dev.pairs, targets.dev_vectors, output_map=self.output_map)

    # ------------------------------------------------------------------ checkpoints
    def _start(self, untrained: dict[str, float] | None) -> RunState:
        run_state = RunState(history=[{"step": 0, "stage": "untrained", **untrained}] if untrained else [])
        student = self._whole_student()
        if self._main:
            run_state.best = self._evaluate(student, self.parts.plan, self.parts.targets)
            run_state.history.append({"step": 0, **run_state.best})
            self._export({"step": 0, **run_state.best}, student)
            logger.info("step 0 dev: %s", format_metrics(run_state.best) or "no dev set (--dev-pairs 0)")
        return run_state

    def _export(self, info: dict[str, Any], student: SentenceTransformer) -> None:
        export_student(student, self.cfg, info, self.output_map, max_seq_length=self.saved_seq_length)

    def _checkpoint(self, run_state: RunState) -> None:
        """Write a checkpoint from the main process with every rank's random state (every rank
        calls this: the states are gathered; under FSDP the full weights too). Unread step flags are
        read first: a checkpoint never records a state past a bad step that ``--skip-nonfinite`` does
        not allow."""
        self._read_guard(run_state)
        rng_ranks = gather_rng_states(self.agreement, ckpt.rng_state())
        if not (self._main or self.sharded):
            return
        state = checkpoint_state(self.parts, run_state, self.cfg, self.acc.scaler, self.run_id, self.sharded)
        state["rng_ranks"] = rng_ranks
        if self._main:
            write_checkpoint(self.acc, self.parts, self.cfg, state)

    # ------------------------------------------------------------------ the loop
    def _on_signal(self, signum: int, _frame: object) -> None:
        logger.warning("received signal %d: saving a checkpoint after this step, then stopping", signum)
        self._stop_signal = signum

    def _train(self, run_state: RunState) -> bool:
        """Steps until the plan ends or a signal asks to stop (returns True then). The loss, clip and
        non-finite flags stay on the device between reads (every ``--log-every`` steps, before each
        dev evaluation and checkpoint): a step never waits for the accelerator."""
        cfg, total = self.cfg, self.parts.plan.total_steps
        previous = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
        for sig in previous:
            signal.signal(sig, self._on_signal)
        self.parts.student.train()
        bar = Progress(total=total, initial=run_state.step, desc="train", unit="step")
        acc, objective = self.acc, self.parts.objective
        self._batches = step_batches(
            self.parts.plan,
            objective,
            acc.device,
            rank=acc.process_index,
            world=acc.num_processes,
            start=run_state.step,
            workers=loader_workers(cfg.loader_workers, acc.device, objective),
            grad_accum=cfg.grad_accum,
            tokens=self.tokens,
        )
        try:
            while run_state.step < total:
                out = self._step(run_state)
                # every rank stops after the same step, whichever rank(s) the signal reached
                stop = self.agreement.agreed(self._stop_signal is not None)
                bar.update(1)
                evaluate = run_state.step % cfg.eval_every == 0 or run_state.step == total
                save = bool(cfg.save_every and run_state.step % cfg.save_every == 0) or stop
                if evaluate or save or run_state.step % cfg.log_every == 0:
                    postfix = self._read_guard(run_state)
                    if evaluate:
                        student = self._whole_student()
                        if self._main:
                            postfix.update(self._dev_check(run_state, out, student))
                    bar.set_postfix(postfix)
                if save:
                    self._checkpoint(run_state)
                if stop:
                    return True
        except RuntimeError as exc:
            if (dead := dead_worker(exc)) is None:
                raise
            raise TrainingError(
                f"{dead} (the run was at step {run_state.step}); {self._resume_hint()}"
            ) from None
        finally:
            self._batches.close()  # stops the loader's workers
            bar.close()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        return False

    def _resume_hint(self) -> str:
        """What ``--resume`` would do now: continue from this run's last checkpoint, if any."""
        saved = ckpt.list_checkpoints(self.cfg.output, self.run_id)
        if not saved:
            return "no checkpoint was written yet, so rerun (--save-every sets how often one is written)"
        step = (ckpt.read_meta(saved[-1]) or {}).get("step", "?")
        return f"--resume continues from the last checkpoint (step {step})"

    def _read_guard(self, run_state: RunState) -> dict[str, str]:
        """Read the steps' device-side flags (one host sync): count clipped and skipped steps, stop
        past ``--skip-nonfinite``; the progress bar's loss and pairs/s."""
        t0 = time.perf_counter()
        report = self.guard.read()
        run_state.train_time += time.perf_counter() - t0  # the wait for the device is training time
        run_state.clipped_steps += report.clipped
        for step in report.skipped:
            what = "loss" if step in report.bad_loss else "gradient"
            plan = self.parts.plan
            count_nonfinite(run_state, step, what, plan.pairs(plan.batch(step - 1)), self.cfg)
        postfix = {"pairs/s": f"{run_state.pairs_seen / max(run_state.train_time, 1e-9):.1f}"}
        if report.last_loss is not None:
            postfix["loss"] = f"{report.last_loss:.4f}"
            self.acc.log({"loss": report.last_loss}, step=run_state.step)  # --report-to (main process)
        return postfix

    def _step(self, run_state: RunState) -> dict[str, torch.Tensor]:
        """One optimizer step on this process's share of the planned global batch, in
        ``--grad-accum`` forward passes (accelerate's ``accumulate``: DDP syncs the gradients on the
        last one only). Each pass's loss is weighted by its share of the pairs, so for mean losses
        the step equals one pass over the whole batch; DDP averages the processes' gradients, which
        equals one process on the whole batch. No host sync (`StepGuard`)."""
        p, cfg, acc = self.parts, self.cfg, self.acc
        t0 = time.perf_counter()
        chunks, batches = next(self._batches)  # this process's share, in --grad-accum passes
        share = sum(len(c) for c in chunks)
        p.optimizer.zero_grad(set_to_none=True)
        p.objective.begin_step(run_state.step)
        totals: dict[str, torch.Tensor] = {}
        for chunk, batch in zip(chunks, batches, strict=True):
            weight = len(chunk) / share
            with acc.accumulate(p.model):
                with acc.autocast():
                    out = p.model(batch)
                # accelerate divides by grad_accum; the weight makes the passes sum to the batch mean
                acc.backward(out["loss"] * (weight * cfg.grad_accum))
            for k, v in out.items():
                totals[k] = totals.get(k, 0.0) + v.detach().float() * weight
        grad_norm = acc.clip_grad_norm_(p.params, cfg.grad_clip or float("inf"))
        self.guard.check(run_state.step + 1, totals["loss"], grad_norm, p.optimizer)
        # fp16 only: the loss scaler skips a step with an overflowing gradient and lowers its scale
        # (read on the host: fp16 runs sync once per step; the fused AdamW takes the skip inside
        # its kernel, so accelerate's optimizer_step_was_skipped cannot see it)
        scale = acc.scaler.get_scale() if acc.scaler is not None else None
        p.optimizer.step()
        self.guard.disarm(p.optimizer)
        if scale is not None and acc.scaler.get_scale() < scale:
            run_state.skipped_by_scaler += 1
        p.scheduler.step()
        run_state.step += 1
        run_state.pairs_seen += cfg.pairs_per_step
        run_state.train_time += time.perf_counter() - t0
        return totals

    def _dev_check(
        self, run_state: RunState, out: dict[str, torch.Tensor], student: SentenceTransformer
    ) -> dict[str, str]:
        t0 = time.perf_counter()
        p = self.parts
        metrics = self._evaluate(student, p.plan, p.targets)
        loss = out["loss"].item()
        run_state.history.append(
            {"step": run_state.step, "loss": loss, **{k: float(v) for k, v in out.items()}, **metrics}
        )
        logger.info("step %d loss %.4f dev: %s", run_state.step, loss, format_metrics(metrics) or "none")
        if not metrics:  # no dev set: nothing to compare, the final weights are exported
            return {}
        self.acc.log(metrics, step=run_state.step)  # --report-to
        if metrics["dev_score"] > run_state.best["dev_score"]:
            run_state.best, run_state.best_step = metrics, run_state.step
            self._export({"step": run_state.step, **metrics}, student)
        self.timings["evaluation"] = self.timings.get("evaluation", 0.0) + time.perf_counter() - t0
        postfix = {"dev_acc": f"{metrics['dev_score']:.1f}"}
        if "dev_mse" in metrics:
            postfix["dev_mse"] = f"{metrics['dev_mse']:.3f}"
        return postfix

    # ------------------------------------------------------------------ the end
    def _finish(self, run_state: RunState, interrupted: bool) -> TrainResult:
        cfg, plan = self.cfg, self.parts.plan
        self._read_guard(run_state)
        if cfg.save_every and not interrupted and run_state.step % cfg.save_every:
            self._checkpoint(run_state)
        if cfg.model_from == "final" and not interrupted:
            student = self._whole_student()
            if self._main:
                self._export({"step": run_state.step, **run_state.history[-1]}, student)
                final = run_state.history[-1]  # the dev check of the last step: what was exported
                run_state.best = {k: final[k] for k in run_state.best if k in final}
            run_state.best_step = run_state.step
        self.timings["training"] = run_state.train_time
        result = train_result(cfg, plan, run_state, self.timings, interrupted)
        if self._main:
            extra = {"forced_resume_changes": self.forced_changes} if self.forced_changes else {}
            if self.warnings:
                extra["warnings"] = self.warnings
            write_run_log(
                Path(cfg.output), cfg, result, str(self.acc.device), self.acc.mixed_precision, extra
            )
        return result


def train(cfg: TrainConfig) -> TrainResult:
    """Run one training job described by ``cfg`` (see :class:`TrainConfig`)."""
    return Trainer(cfg).run()
