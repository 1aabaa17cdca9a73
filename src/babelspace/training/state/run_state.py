"""What a run carries across steps and across a restart: the objects it trains (`RunParts`), its
`RunState`, what a checkpoint holds, and the checks before resuming one.

A checkpoint holds the objective (student + heads), optimizer, schedule, loss scaler, sampler
position, every random generator and the `RunState`, so a resumed run continues the uninterrupted
run's exact trajectory (tests/training/test_training_trainer.py, ``test_resume_equals_uninterrupted_run``). The first
four are written and restored by accelerate's ``save_state``/``load_state``
(:mod:`~babelspace.checkpoints.accelerated`), the rest by babelspace (``state.pt``); under FSDP
babelspace gathers and restores everything itself.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from sentence_transformers import SentenceTransformer

from babelspace.checkpoints import checkpoint as ckpt
from babelspace.checkpoints.accelerated import FORMAT, load_parts, parts_bytes, saver
from babelspace.checkpoints.files import checkpoint_format
from babelspace.data.mix import mix_weights
from babelspace.data.pairs import ParallelPair
from babelspace.errors import TrainingError
from babelspace.training.collective import own_rng_state
from babelspace.training.config import TrainConfig
from babelspace.training.output.folder import is_babelspace_output, no_checkpoint_message
from babelspace.training.setup.phases import DataPlan, TeacherTargets
from babelspace.training.sharded import full_training_state, load_full_training_state
from babelspace.training.state.resume_settings import config_changes

logger = logging.getLogger(__name__)

Resumed = tuple[Path, dict[str, Any]]  # a checkpoint's path and its state


@dataclass
class RunParts:
    """The objects one run trains with (built by the phases before the loop)."""

    student: SentenceTransformer
    objective: torch.nn.Module
    model: torch.nn.Module  # the objective as prepared by accelerate (DDP-wrapped under torchrun)
    optimizer: Any
    scheduler: Any
    params: list[torch.nn.Parameter]
    plan: DataPlan
    targets: TeacherTargets


@dataclass
class RunState:
    """What changes from step to step besides the weights (checkpointed)."""

    step: int = 0
    history: list[dict[str, float]] = field(default_factory=list)
    best: dict[str, float] = field(default_factory=lambda: {"dev_score": float("-inf")})
    best_step: int = 0
    skipped_nonfinite: int = 0
    skipped_by_scaler: int = 0
    clipped_steps: int = 0  # steps whose gradient norm exceeded --grad-clip (then clipped)
    pairs_seen: int = 0
    train_time: float = 0.0


def set_seed(seed: int) -> None:
    """Seed Python, NumPy and torch: dropout and masking draw from the global generators, whose
    states every checkpoint stores, so a resumed run continues the same random streams."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def check_resume(state: dict[str, Any], fingerprint: str, cfg: TrainConfig) -> list[str]:
    """Refuse to resume a checkpoint whose corpus or trajectory settings differ from this run's
    (each changed flag named); with ``--force-resume`` return the differences for the run log. The
    corpus is compared by its fingerprint: the same file named by another path (``../p.tsv`` from
    another folder) resumes."""
    if state.get("objective_name") != cfg.objective:
        raise TrainingError(
            f"checkpoint was written by objective {state.get('objective_name')!r}, not {cfg.objective!r}"
        )
    saved, now = dict(state.get("config") or {}), cfg.to_dict()
    same_texts = state.get("fingerprint") == fingerprint
    if same_texts and mix_weights(saved.get("data")) == mix_weights(now.get("data")):
        saved["data"] = now["data"]  # the same corpus named by another path (``../p.tsv``)
    changes = config_changes(saved, now)
    if state.get("fingerprint") != fingerprint:
        old = str(state.get("fingerprint", "?"))[:12]
        changes.insert(
            0, f"training corpus changed since the checkpoint was written ({old} -> {fingerprint[:12]})"
        )
    if changes and not cfg.force_resume:
        raise TrainingError(
            "refusing to resume: " + "; ".join(changes) + ". Restore these settings or the data, use a new "
            "--out, or pass --force-resume (the differences are recorded in the run log)"
        )
    for change in changes:
        logger.warning("--force-resume: %s", change)
    return changes


def find_checkpoint(cfg: TrainConfig, plan: DataPlan) -> tuple[Resumed | None, str, list[str]]:
    """``(checkpoint or None, run id, settings forced by --force-resume)`` for this run.

    With ``--resume``: the newest run's newest checkpoint in ``--out`` (not the highest step of
    any run in the folder), checked against this run (`check_resume`), and the plan's sampler moved
    to where it stopped; an output that holds a model but no readable checkpoint is refused (its
    model is never replaced by an untrained one), an empty one starts a new run. Otherwise a fresh
    run id.
    """
    if not cfg.resume:
        return None, ckpt.new_run_id(), []
    resumed = ckpt.load_latest(cfg.output, run_id=ckpt.latest_run_id(cfg.output), whole=False)
    if resumed is None:
        if is_babelspace_output(cfg.output):  # its checkpoints are all unreadable: keep its model
            reason = ckpt.unusable_reason(cfg.output)
            if reason is not None:
                raise TrainingError(
                    f"--resume: no checkpoint in {cfg.output} can be used (the newest: {reason})"
                )
            raise TrainingError(no_checkpoint_message(cfg.output))
        logger.info("--resume: %s is empty, starting a new run", cfg.output)
        return None, ckpt.new_run_id(), []
    state = resumed[1]
    forced = check_resume(state, plan.fingerprint, cfg)
    plan.sampler.load_state_dict(state["sampler"])
    return resumed, state.get("run_id") or ckpt.new_run_id(), forced


def checkpoint_state(
    parts: RunParts, run_state: RunState, cfg: TrainConfig, scaler: Any, run_id: str, sharded: bool = False
) -> dict[str, Any]:
    """What ``state.pt`` holds for `restore_run_state` to continue the run after ``run_state.step``
    steps. Sharded (FSDP): also the full model and optimizer state, gathered to the main process
    (collective), the schedule and the loss scaler; otherwise accelerate's ``save_state`` writes
    those (`write_checkpoint`)."""
    state: dict[str, Any] = {
        "objective_name": cfg.objective,
        "sharded": sharded,
        "sampler": parts.plan.sampler.state_dict(batches_done=run_state.step),
        "rng": ckpt.rng_state(),
        "step": run_state.step,
        "history": run_state.history,
        "best": run_state.best,
        "best_step": run_state.best_step,
        "skipped_nonfinite": run_state.skipped_nonfinite,
        "skipped_by_scaler": run_state.skipped_by_scaler,
        "clipped_steps": run_state.clipped_steps,
        "fingerprint": parts.plan.fingerprint,
        "run_id": run_id,
        "config": cfg.to_dict(),
    }
    if sharded:
        objective_state, optimizer_state = full_training_state(parts.model, parts.optimizer)
        state.update(
            objective=objective_state,
            optimizer=optimizer_state,
            scheduler=parts.scheduler.state_dict(),
            scaler=scaler.state_dict() if scaler is not None else None,
        )
    return state


def write_checkpoint(acc: Any, parts: RunParts, cfg: TrainConfig, state: dict[str, Any]) -> Path:
    """Write ``state`` (`checkpoint_state`) as the checkpoint of its step (main process only), with
    accelerate's files beside it unless the run is sharded."""
    if state["sharded"]:
        return ckpt.save_checkpoint(cfg.output, state["step"], state, keep_last=cfg.keep_last)
    return ckpt.save_checkpoint(
        cfg.output,
        state["step"],
        state,
        keep_last=cfg.keep_last,
        save_parts=saver(acc, parts.objective),
        parts_bytes=parts_bytes(parts.objective, parts.optimizer),
    )


def restore_run_state(parts: RunParts, resumed: Resumed, acc: Any, sharded: bool = False) -> RunState:
    """Load a checkpoint (`checkpoint_state` and accelerate's files) into ``parts``, the loss
    scaler and this process's random generators; return the run state it recorded."""
    path, state = resumed
    if bool(state.get("sharded", False)) != sharded:
        how = ("with", "without") if state.get("sharded") else ("without", "with")
        raise TrainingError(
            f"{path} was written by a run {how[0]} FSDP sharding and this run is {how[1]} it: their optimizer "
            "states differ. Resume it the way it was launched (docs/training.md, 'Big encoders: FSDP')"
        )
    if checkpoint_format(path) == FORMAT:
        load_parts(acc, path)  # model, optimizer, schedule, scaler, the main process's random state
    else:
        _restore_own(parts, state, acc.scaler, sharded)
    ckpt.set_rng_state(own_rng_state(state, acc.process_index, acc.num_processes))
    run_state = RunState(
        step=state["step"],
        history=state["history"],
        best=state["best"],
        best_step=state["best_step"],
        skipped_nonfinite=state["skipped_nonfinite"],
        skipped_by_scaler=state["skipped_by_scaler"],
        clipped_steps=state["clipped_steps"],
    )
    logger.info("resumed from %s (step %d of %d)", path, run_state.step, parts.plan.total_steps)
    return run_state


def _restore_own(parts: RunParts, state: dict[str, Any], scaler: Any, sharded: bool) -> None:
    """A ``state``-format checkpoint (FSDP, or written before accelerate's files): everything is in
    ``state.pt``."""
    if sharded:
        load_full_training_state(parts.model, parts.optimizer, state["objective"], state["optimizer"])
    else:
        parts.objective.load_state_dict(state["objective"])
        parts.optimizer.load_state_dict(state["optimizer"])
    parts.scheduler.load_state_dict(state["scheduler"])
    if scaler is not None and state.get("scaler"):
        scaler.load_state_dict(state["scaler"])


def count_nonfinite(
    run_state: RunState, step: int, what: str, pairs: Sequence[ParallelPair], cfg: TrainConfig
) -> None:
    """Count step ``step`` (1-based), skipped for a non-finite ``what`` ("loss" or "gradient"), or
    raise once ``--skip-nonfinite`` such steps were skipped (naming the batch's sources and the
    intact checkpoint: the skipped step never moved the weights, and no checkpoint was written
    after it)."""
    where = ", ".join(p.origin for p in pairs[:8]) + (" ..." if len(pairs) > 8 else "")
    if run_state.skipped_nonfinite >= cfg.skip_nonfinite:
        raise TrainingError(
            f"non-finite {what} at step {step}; batch sources: {where}; {ckpt.resume_note(cfg.output)} "
            "(--skip-nonfinite N skips up to N such batches)"
        )
    run_state.skipped_nonfinite += 1
    logger.warning("skipped step %d: non-finite %s (%s)", step, what, where)
