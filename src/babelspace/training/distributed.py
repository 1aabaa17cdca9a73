"""Where a run computes: the `accelerate` engine (the device and precision come from
:mod:`babelspace.device`).

Device placement, mixed precision (autocast, and a loss scaler for fp16), DDP on NCCL/gloo under
``torchrun`` / ``accelerate launch`` and FSDP/DeepSpeed through an ``accelerate`` config file are
all `accelerate`'s; babelspace only decides *which* device and precision from ``--device`` and
``--precision`` and keeps its own loop around them (docs/training.md, "Devices and precision").
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta

import torch

from babelspace.training.collective import dist_timeout

logger = logging.getLogger(__name__)

_ACCELERATE_PRECISION = {"fp32": "no", "bf16": "bf16", "fp16": "fp16"}


def make_accelerator(device: torch.device, precision: str, **tracking):
    """An ``accelerate.Accelerator`` on ``device`` with ``precision``. Under torchrun it owns the
    process group (NCCL on GPUs, gloo on CPUs). ``tracking``: ``log_with`` and ``project_dir`` for
    ``--report-to`` (:func:`~babelspace.training.trackers.tracker_kwargs`)."""
    from accelerate import Accelerator, DistributedDataParallelKwargs, InitProcessGroupKwargs

    if device.type == "cuda" and device.index is not None:
        torch.cuda.set_device(device)
    # find_unused_parameters: objectives may leave parts of the student out of a given loss
    ddp = DistributedDataParallelKwargs(find_unused_parameters=True)
    # A rank that dies before or between collectives must not leave the others waiting for the
    # default 30 minutes: they fail after BABELSPACE_DIST_TIMEOUT seconds instead.
    timeout = InitProcessGroupKwargs(timeout=timedelta(seconds=dist_timeout()))
    return Accelerator(
        cpu=device.type == "cpu",
        mixed_precision=_ACCELERATE_PRECISION[precision],
        kwargs_handlers=[ddp, timeout],
        step_scheduler_with_optimizer=False,
        **tracking,
    )


def release_accelerator(accelerator=None, failed: bool = False) -> None:
    """End the trackers' run (``accelerator.end_training()``, ``--report-to``), forget accelerate's
    process-wide state, so the next run in this process may choose another device or precision
    (tests and notebooks run several), and close a process group we opened. After a failure the
    closing barrier is skipped: the other ranks may never reach it."""
    from accelerate.state import AcceleratorState, PartialState

    ours = bool(PartialState._shared_state)
    if ours and not failed and torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.barrier()
    if accelerator is not None:
        accelerator.end_training()  # the trackers finish (main process); it closes the group too
    if ours and torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()
    AcceleratorState._reset_state(reset_partial_state=True)


@contextmanager
def torch_threads(threads: int | None) -> Iterator[None]:
    """``torch.set_num_threads`` for the duration of a run, restored afterwards."""
    if not threads:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)
