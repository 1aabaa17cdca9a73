"""``--batch-size auto``: the largest batch whose forward and backward pass fits the GPU.

The probe runs the run's own objective, on the run's student, under the run's autocast, on a
worst-case batch (every sentence ``--max-seq-length`` tokens long; teacher vectors are zeros of the
teacher's width, and a zero contrastive bank of ``--teacher-negatives`` rows when the run has one),
with AdamW's two moment buffers held in memory beside it. The search is accelerate's
``find_executable_batch_size``: it starts at `AUTO_START` pairs per process and, on an error its
``should_reduce_batch_size`` reads as out-of-memory, frees the device cache and tries again with
half as many, until a batch fits. The answer is per process; under torchrun the smallest over the
processes, times the number of processes, is the global ``--batch-size``. The probe's gradients are
discarded and the student's weights are not changed.

On a device that reports no free memory (the CPU) it is an error: give a number.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable

import numpy as np
import torch
from sentence_transformers import SentenceTransformer

from babelspace.data.pairs import ParallelPair
from babelspace.errors import TrainingError
from babelspace.training.config import TrainConfig

logger = logging.getLogger(__name__)

AUTO_START = 4096  # pairs per process: the first batch tried


def largest_fitting(try_batch: Callable[[int], None], start: int = AUTO_START) -> int:
    """The first of ``start, start/2, ...`` for which ``try_batch`` raises no out-of-memory error,
    by accelerate's ``find_executable_batch_size`` (which frees the device cache between tries;
    other errors propagate)."""
    from accelerate.utils import find_executable_batch_size

    size = start

    def halve() -> int:
        nonlocal size
        logger.info("--batch-size auto: %d pairs do not fit, halving", size)
        size //= 2
        return size

    def fits(batch_size: int) -> int:
        try_batch(batch_size)
        return batch_size

    # called, not used as a decorator: the decorator form of some accelerate releases drops
    # reduce_batch_size_fn (fixed by accelerate PR 4160); releases before the argument halve anyway
    takes_reducer = "reduce_batch_size_fn" in inspect.signature(find_executable_batch_size).parameters
    reduce = {"reduce_batch_size_fn": halve} if takes_reducer else {}
    try:
        return find_executable_batch_size(fits, starting_batch_size=start, **reduce)()
    except RuntimeError as exc:
        if "No executable batch size found" not in str(exc):  # accelerate's, after a size of 1
            raise
        raise TrainingError(
            "--batch-size auto: not even one pair fits on the device; use a smaller model"
        ) from None


class _ZeroTeacher:
    """Teacher vectors for the probe: zeros of the teacher's width (the memory of real ones)."""

    def __init__(self, dim: int) -> None:
        self.dim = dim

    def lookup(self, texts) -> np.ndarray:
        return np.zeros((len(texts), self.dim), dtype=np.float32)


def check_auto_batch_device(device: torch.device) -> None:
    """``--batch-size auto`` needs a device whose free memory can be read (one line otherwise)."""
    _device_module(device)


def _device_module(device: torch.device):
    module = getattr(torch, device.type, None)
    if module is None or not hasattr(module, "mem_get_info"):
        raise TrainingError(
            f"--batch-size auto probes GPU memory; {device} has none to probe: give a number "
            "(e.g. --batch-size 16)"
        )
    return module


def probe_batch_size(
    cfg: TrainConfig, student: SentenceTransformer, teacher_dim: int | None, accelerator
) -> int:
    """The global ``--batch-size`` for ``cfg`` (see module docstring)."""
    from babelspace.training.setup.factory import build_objective
    from babelspace.training.setup.phases import TeacherTargets

    device = accelerator.device
    module = _device_module(device)
    long_text = " ".join(["x"] * cfg.train_seq_length)
    pair = ParallelPair(long_text, long_text, "en", "xx", "auto-batch-probe")
    cache = _ZeroTeacher(teacher_dim) if teacher_dim else None
    bank = np.zeros((cfg.teacher_negatives, teacher_dim), np.float32) if teacher_dim else None
    targets = TeacherTargets(cache=cache, bank=bank if cfg.teacher_contrast > 0 else None)
    objective = build_objective(cfg, student, targets)
    params = [p for p in objective.parameters() if p.requires_grad]
    n_params = sum(p.numel() for p in params)

    def try_batch(size: int) -> None:
        moments = torch.empty(2 * n_params, dtype=torch.float32, device=device)  # AdamW's state
        try:
            with accelerator.autocast():
                out = objective(objective.collate([pair] * size))
            out["loss"].backward()
            module.synchronize()
        finally:
            del moments
            objective.zero_grad(set_to_none=True)

    try:
        per_process = largest_fitting(try_batch, AUTO_START)
    finally:
        objective.zero_grad(set_to_none=True)
        module.empty_cache()
    per_process = _smallest_over_processes(per_process, device)
    size = per_process * accelerator.num_processes
    logger.info("--batch-size auto: %d pairs per forward pass (%d per process)", size, per_process)
    return size


def _smallest_over_processes(value: int, device: torch.device) -> int:
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        t = torch.tensor([value], device=device)
        torch.distributed.all_reduce(t, op=torch.distributed.ReduceOp.MIN)
        return int(t.item())
    return value
