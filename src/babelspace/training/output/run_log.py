"""What a finished (or interrupted) run returns, and the run log it leaves in ``--out``
(``babelspace_training.json``: the configuration, device, precision, dev history and counts)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from babelspace.training.config import TrainConfig
from babelspace.training.setup.phases import DataPlan
from babelspace.training.state.run_state import RunState
from babelspace.writable import write_json

logger = logging.getLogger(__name__)

#: Below this share of one epoch of the user's own corpus, the run says so (one warning line).
SMALL_EPOCH_SHARE = 0.01


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
    train_pairs: int = 0  # training pairs of the corpus (after the dev hold-out)
    epoch_share: float = 0.0  # pairs the run trained on / train_pairs (1.0: one epoch)
    own_data: bool = False  # --data names the user's files, folders or Hub datasets


def train_result(
    cfg: TrainConfig, plan: DataPlan, run_state: RunState, timings: dict[str, float], interrupted: bool
) -> TrainResult:
    """The run's result: its run_state, timings, and counts (the plan's, lines skipped per reason,
    steps skipped for non-finite values or by the fp16 loss scaler, steps whose gradient was clipped,
    optimizer steps)."""
    counts = {
        **plan.counts,
        **{f"skipped_lines_{reason.replace(' ', '_')}": n for reason, n in plan.train.report.skipped.items()},
        "skipped_nonfinite": run_state.skipped_nonfinite,
        "skipped_by_scaler": run_state.skipped_by_scaler,
        "clipped_steps": run_state.clipped_steps,
        "optimizer_steps": run_state.step,
    }
    n_train = len(plan.train)
    share = run_state.step * cfg.pairs_per_step / n_train if n_train else 0.0
    own = own_data(cfg)
    if own and share < SMALL_EPOCH_SHARE and not interrupted:
        logger.warning(
            "the run trained on %.2g%% of one epoch of its %d training pairs (%d steps x %d pairs): "
            "give --epochs (e.g. --epochs 1) or more --max-steps to train on more of the corpus",
            100 * share,
            n_train,
            run_state.step,
            cfg.pairs_per_step,
        )
    return TrainResult(
        output=Path(cfg.output),
        steps=run_state.step,
        best_step=run_state.best_step,
        best_dev=run_state.best,
        history=run_state.history,
        timings=dict(timings),
        pairs_per_second=run_state.pairs_seen / run_state.train_time if run_state.train_time else 0.0,
        data_report=[plan.train.report.summary()],
        counts=counts,
        interrupted=interrupted,
        config=cfg,
        train_pairs=n_train,
        epoch_share=share,
        own_data=own,
    )


def own_data(cfg: TrainConfig) -> bool:
    """Whether ``--data`` names anything but the Bible and the built-in sources (a user's corpus)."""
    from babelspace.data.sources import is_source
    from babelspace.training.setup.corpora import mix_names

    return any(name != "bible" and not is_source(name) for name in mix_names(cfg.data))


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
    write_json(output / "babelspace_training.json", log)
