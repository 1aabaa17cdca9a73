"""What the processes of one run agree on under ``torchrun``: when to stop, every rank's random
state in a checkpoint, a batch large enough for every process, and one line when a rank dies.

Several processes train one model only if they take the same decisions at the same step:

* **stop**: a signal reaches one rank (or some of them); :class:`StopAgreement` all-reduces a flag
  after every step on a small gloo group on the CPU (no GPU synchronisation), so every rank saves
  the same checkpoint after the same step and stops;
* **random state**: dropout and masking draw from each rank's own generators, which diverge
  (each rank sees other pairs); :func:`gather_rng_states` collects every rank's Python, NumPy,
  torch and CUDA states into the checkpoint and :func:`own_rng_state` gives each rank its own
  back on resume (accelerate's ``save_state`` likewise keeps one random state per process);
* **deadlines**: every collective here and in the default group waits at most
  ``BABELSPACE_DIST_TIMEOUT`` seconds; a peer that died or stopped answering turns into one
  :class:`RankFailure` line naming the rank(s) (:func:`rank_failure`), not a gloo/NCCL traceback.

With one process every function here is a local no-op.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import torch

from babelspace.errors import TrainingError, first_error_line

logger = logging.getLogger(__name__)

DEFAULT_DIST_TIMEOUT_S = 600.0
_ALIVE_KEY = "babelspace/alive/{rank}"
_ALIVE_WAIT_S = 3.0


class RankFailure(TrainingError):
    """Another process of a torchrun job died or stopped answering."""


def dist_timeout() -> float:
    """Seconds any collective may wait (``BABELSPACE_DIST_TIMEOUT``, default 600)."""
    raw = os.environ.get("BABELSPACE_DIST_TIMEOUT", "")
    try:
        value = float(raw) if raw else DEFAULT_DIST_TIMEOUT_S
    except ValueError:
        raise TrainingError(f"BABELSPACE_DIST_TIMEOUT={raw!r} is not a number of seconds") from None
    if not value > 0:
        raise TrainingError(f"BABELSPACE_DIST_TIMEOUT={raw!r} must be a positive number of seconds")
    return value


def _initialized() -> bool:
    return torch.distributed.is_available() and torch.distributed.is_initialized()


def world() -> tuple[int, int]:
    """``(rank, number of processes)`` of the default process group; ``(0, 1)`` without one."""
    if not _initialized():
        return 0, 1
    return torch.distributed.get_rank(), torch.distributed.get_world_size()


def check_batch_per_process(batch_size: int, processes: int) -> None:
    """Every process needs at least one pair of each global batch."""
    if batch_size < processes:
        raise TrainingError(
            f"--batch-size {batch_size} is smaller than the {processes} processes of this run: each "
            f"process needs at least one pair per step; use --batch-size {processes} or more "
            "(--batch-size is the global batch) or fewer processes"
        )


class StopAgreement:
    """A stop flag all-reduced (max) across ranks on a CPU gloo group, every step.

    Build it on every rank (creating the group is collective); :meth:`agreed` is collective too."""

    def __init__(self) -> None:
        self.rank, self.size = world()
        self.group = None
        if self.size > 1:
            self.group = torch.distributed.new_group(
                backend="gloo", timeout=timedelta(seconds=dist_timeout())
            )
        self._flag = torch.zeros(1, dtype=torch.int32)

    def agreed(self, local_stop: bool) -> bool:
        """True on every rank when any rank asked to stop."""
        if self.group is None:
            return local_stop
        self._flag.fill_(1 if local_stop else 0)
        torch.distributed.all_reduce(self._flag, op=torch.distributed.ReduceOp.MAX, group=self.group)
        return bool(self._flag.item())

    def gather(self, obj: Any) -> list[Any]:
        """Every rank's ``obj``, in rank order, on every rank (collective; one entry without DDP)."""
        if self.group is None:
            return [obj]
        out: list[Any] = [None] * self.size
        torch.distributed.all_gather_object(out, obj, group=self.group)
        return out

    def barrier(self) -> None:
        """Wait for every rank, at most ``BABELSPACE_DIST_TIMEOUT`` seconds (collective)."""
        if self.group is not None:
            self._flag.zero_()
            torch.distributed.all_reduce(self._flag, group=self.group)


def gather_rng_states(agreement: StopAgreement, own: dict[str, Any]) -> list[dict[str, Any]]:
    """Every rank's random state (``own`` on each rank), in rank order (collective)."""
    return agreement.gather(own)


def own_rng_state(state: dict[str, Any], rank: int, processes: int) -> dict[str, Any]:
    """This rank's random state from a checkpoint: its own entry of ``rng_ranks`` when the
    checkpoint was written by as many processes; otherwise the main process's (with a warning:
    the resumed run then draws other dropout/masking than the uninterrupted one would have)."""
    ranks = state.get("rng_ranks")
    if ranks and len(ranks) == processes:
        return ranks[rank]
    written = len(ranks) if ranks else 1
    if written != processes:
        logger.warning(
            "the checkpoint was written by %d process(es) and this run has %d: every rank resumes "
            "with the main process's random state, so dropout/masking differ from an uninterrupted run",
            written,
            processes,
        )
    return state["rng"]


def is_collective_failure(exc: BaseException) -> bool:
    """True for the errors torch.distributed raises when a peer died or a wait timed out."""
    dist_error = getattr(torch.distributed, "DistError", None)
    if dist_error is not None and isinstance(exc, dist_error):
        return True
    if not isinstance(exc, RuntimeError):
        return False
    text = str(exc).lower()
    return any(
        s in text for s in ("gloo", "nccl", "connection closed by peer", "connection reset", "timed out")
    )


def _alive_peers(store: Any, rank: int, size: int, timeout: float) -> set[int]:
    """Ranks that answer the store within ``timeout`` seconds (each survivor marks itself)."""
    store.set(_ALIVE_KEY.format(rank=rank), "1")
    alive = {rank}
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and len(alive) < size:
        for r in range(size):
            if r not in alive and store.check([_ALIVE_KEY.format(rank=r)]):
                alive.add(r)
        time.sleep(0.1)
    return alive


@contextmanager
def _sigterm_ignored() -> Iterator[None]:
    """torchrun's agent sends SIGTERM to the surviving ranks as soon as one dies; while a survivor
    works out which rank died (a few seconds) it ignores it, so that its one line reaches the user."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def rank_failure(exc: BaseException, rank: int, size: int) -> RankFailure:
    """One line for a failed collective: which ranks did not answer (asked through the rendezvous
    store, which torchrun's agent keeps alive), and the deadline."""
    silent: list[int] = []
    try:
        from torch.distributed.distributed_c10d import _get_default_store

        with _sigterm_ignored():
            alive = _alive_peers(_get_default_store(), rank, size, _ALIVE_WAIT_S)
        silent = sorted(set(range(size)) - alive)
    except Exception:  # noqa: BLE001 - the store may be gone with the rank that hosted it
        silent = []
    who = (
        "rank " + ", ".join(map(str, silent)) + (" has" if len(silent) == 1 else " have")
        if silent
        else "another rank has"
    )
    first = first_error_line(exc)
    return RankFailure(
        f"rank {rank} of {size}: {who} died or stopped answering (collective failed: {first}); "
        f"waits are limited by BABELSPACE_DIST_TIMEOUT={dist_timeout():g}s. The last checkpoint in "
        "--out is intact: rerun with --resume"
    )
