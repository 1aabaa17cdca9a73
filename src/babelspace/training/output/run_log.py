"""What a finished (or interrupted) run returns, and the run log it leaves in ``--out``
(``babelspace_training.json``: the configuration, device, precision, dev history and counts)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from babelspace.training.config import TrainConfig
from babelspace.training.setup.phases import DataPlan
from babelspace.training.state.run_state import Progress


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
    is_main: bool = True  # False on the other processes of a torchrun job (they write nothing)
    config: TrainConfig | None = None  # the resolved config (e.g. --batch-size auto's probed size)
    table: list[dict[str, Any]] | None = None  # the held-out table (training.run.run builds it)
    pushed_url: str | None = None  # the Hub repository the folder was uploaded to, if any


def train_result(
    cfg: TrainConfig, plan: DataPlan, progress: Progress, timings: dict[str, float], interrupted: bool
) -> TrainResult:
    """The run's result: its progress, timings, and counts (the plan's, lines skipped per reason,
    steps skipped for non-finite values or by the fp16 loss scaler, steps whose gradient was clipped,
    optimizer steps)."""
    counts = {
        **plan.counts,
        **{f"skipped_lines_{reason.replace(' ', '_')}": n for reason, n in plan.train.report.skipped.items()},
        "skipped_nonfinite": progress.skipped_nonfinite,
        "skipped_by_scaler": progress.skipped_by_scaler,
        "clipped_steps": progress.clipped_steps,
        "optimizer_steps": progress.step,
    }
    return TrainResult(
        output=Path(cfg.output),
        steps=progress.step,
        best_step=progress.best_step,
        best_dev=progress.best,
        history=progress.history,
        timings=dict(timings),
        pairs_per_second=progress.pairs_seen / progress.train_time if progress.train_time else 0.0,
        data_report=[plan.train.report.summary()],
        counts=counts,
        interrupted=interrupted,
        config=cfg,
    )


def write_run_log(
    output: Path, cfg: TrainConfig, result: TrainResult, device: str, precision: str, extra: dict[str, Any]
) -> None:
    """Write ``babelspace_training.json`` into ``output`` (``extra`` keys first)."""
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
