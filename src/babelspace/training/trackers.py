"""``--report-to``: the training loss and the dev scores sent to an experiment tracker (TensorBoard,
Weights & Biases or MLflow) through accelerate's trackers.

:func:`check_tracker` refuses, before any work, a tracker whose package is missing;
:func:`tracker_kwargs` gives the ``Accelerator`` its ``log_with`` and ``project_dir``
(`tracking_dir`: ``<out>/runs``); :func:`start_tracking` opens the tracker's run on the main process
(``init_trackers`` with the resolved config as flat scalars) and logs the step-0 dev check. The
trainer then calls ``accelerator.log`` with the loss at each read of the device's step flags (every
``--log-every`` steps, and before each dev check and checkpoint) and with the dev scores of each dev
check; ``release_accelerator`` ends the tracker's run (``end_training``) however the run ends.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from babelspace.errors import TrainingError
from babelspace.training.config import TrainConfig

PROJECT = "babelspace"  # the wandb project, the MLflow experiment, the TensorBoard sub-folder
_AVAILABLE = {  # --report-to -> (its package, accelerate's check for it)
    "tensorboard": ("tensorboard", "is_tensorboard_available"),
    "wandb": ("wandb", "is_wandb_available"),
    "mlflow": ("mlflow", "is_mlflow_available"),
}


def check_tracker(report_to: str) -> None:
    """One line when ``--report-to``'s package is not installed (accelerate would skip it silently)."""
    if report_to == "none":
        return
    import accelerate.utils

    package, check = _AVAILABLE[report_to]
    if not getattr(accelerate.utils, check)():
        raise TrainingError(f"--report-to {report_to} needs the {package} package: pip install {package}")


def tracking_dir(output: Path) -> Path:
    """Where the trackers write locally: ``<out>/runs`` (TensorBoard's events in ``runs/babelspace``)."""
    return Path(output) / "runs"


def tracker_kwargs(cfg: TrainConfig) -> dict[str, Any]:
    """The ``Accelerator`` arguments of ``--report-to`` (none for ``none``)."""
    if cfg.report_to == "none":
        return {}
    return {"log_with": cfg.report_to, "project_dir": str(tracking_dir(cfg.output))}


def start_tracking(accelerator, cfg: TrainConfig, first: dict[str, float] | None) -> None:
    """Open the tracker's run (main process) with ``cfg`` as its hyperparameters; log ``first``,
    the step-0 dev scores of a run that starts (None on ``--resume``: logged by the first run)."""
    if cfg.report_to == "none" or not accelerator.is_main_process:
        return
    folder = tracking_dir(cfg.output)
    folder.mkdir(parents=True, exist_ok=True)
    per_tracker = {
        "wandb": {"name": cfg.output.name, "dir": str(folder)},
        "mlflow": {"run_name": cfg.output.name},
    }
    accelerator.init_trackers(PROJECT, config=flat_config(cfg), init_kwargs=per_tracker)
    if first:
        accelerator.log(first, step=0)


def flat_config(cfg: TrainConfig) -> dict[str, bool | int | float | str]:
    """The config as the scalars trackers take: lists joined by commas, None as ``"none"``."""
    return {k: _scalar(v) for k, v in cfg.to_dict().items()}


def _scalar(value: Any) -> bool | int | float | str:
    if value is None:
        return "none"
    if isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return ",".join(map(str, value))
    return str(value)
