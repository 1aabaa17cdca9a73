"""Local encoding workers (``mine --workers N``, ``encode --workers N``) through sentence-transformers'
multi-process pool: ``model.start_multi_process_pool(devices)``, ``model.encode(texts, pool=pool)``,
``model.stop_multi_process_pool(pool)``.

The devices are babelspace's (:func:`~babelspace.mining.devices.worker_devices`: worker *i* on
``cuda:(i mod GPUs)``, or every worker on the one device asked for, ``auto`` resolved in this
process), and each worker gets its share of the CPU threads (``OMP_NUM_THREADS`` and
``MKL_NUM_THREADS`` set while the pool starts, so the spawned processes read them when torch starts).
sentence-transformers sends the model loaded here to every worker (its weights in shared memory),
so the model is loaded once, on the CPU, and not once per worker.

Shards and resume: each shard is one ``encode`` call over the pool, which cuts it into chunks for
all the workers and returns its rows in order; the driver then writes the shard
(:meth:`~babelspace.vectors.shards.ShardStore.write_shard`) before the next one starts. An
interrupted run therefore keeps every shard written so far and encodes only the missing ones when
rerun, as before; what differs from the pool this replaces is that all workers share one shard at a
time instead of each taking whole shards, so at most one shard's work is lost on an interruption.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

logger = logging.getLogger(__name__)

#: Chunks of a shard per worker: enough to even out workers that run at different speeds.
CHUNKS_PER_WORKER = 4
_THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")


def pool_devices(device: str, workers: int) -> list[str]:
    """The torch device of each worker: :func:`worker_devices`, with ``auto`` resolved here (a
    device this machine lacks is a one-line error before any process starts)."""
    from babelspace.device import resolve_device
    from babelspace.mining.devices import worker_devices

    return [str(resolve_device(d)) for d in worker_devices(device, workers)]


@contextmanager
def _thread_environment(threads: int) -> Iterator[None]:
    saved = {name: os.environ.get(name) for name in _THREAD_VARIABLES}
    os.environ.update(dict.fromkeys(_THREAD_VARIABLES, str(threads)))
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


class _StopWorker:
    """Put on the pool's input queue after the work: a worker that reads it ends normally
    (``SystemExit`` raised while it is unpickled), so its exit handlers run and release the
    semaphores it made (tqdm's lock, made by every ``encode`` call); a terminated worker leaves them
    to the resource tracker, which warns of "leaked semaphore objects" when the command exits."""

    def __getstate__(self) -> dict[str, bool]:
        return {"stop": True}  # a state, so that unpickling calls __setstate__

    def __setstate__(self, state: dict[str, bool]) -> None:
        raise SystemExit(0)


#: Seconds the workers get to end after the stop signal before they are terminated.
STOP_WAIT_S = 10.0


def _end_workers(pool: dict[str, Any]) -> None:
    """Ask every (idle) worker to end, and wait for them up to :data:`STOP_WAIT_S` in all."""
    import time

    processes = pool["processes"]
    for _ in processes:
        pool["input"].put([-1, _StopWorker(), {}])
    deadline = time.monotonic() + STOP_WAIT_S
    for p in processes:
        p.join(max(0.0, deadline - time.monotonic()))


@contextmanager
def encoding_pool(model: Any, devices: list[str]) -> Iterator[dict[str, Any]]:
    """sentence-transformers' pool of one worker per entry of ``devices``, stopped on exit (also on
    an error or Ctrl-C, so no worker outlives the command). After a normal end the workers are
    first asked to end by themselves (:class:`_StopWorker`); an interrupted pool is terminated at
    once."""
    from babelspace.mining.devices import threads_per_worker

    logger.info("encoding workers on %s", ", ".join(devices))
    with _thread_environment(threads_per_worker(devices)):
        pool = model.start_multi_process_pool(devices)
    try:
        yield pool
        _end_workers(pool)
    finally:
        model.stop_multi_process_pool(pool)


def pool_encode(
    model: Any, pool: dict[str, Any], texts: Sequence[str], batch_size: int, normalize: bool = True
) -> np.ndarray:
    """``texts`` encoded by the pool's workers (float32, L2-normalised unless ``normalize`` is false;
    the model's default prompt),
    rows in input order. The pool cuts its input into chunks in order, so the texts go in sorted by
    token count (:func:`~babelspace.models.encoder.token_length_order`) and each chunk pads little."""
    from babelspace.models.encoder import token_length_order

    workers = len(pool["processes"])
    chunk = max(1, min(len(texts), max(batch_size, -(-len(texts) // (workers * CHUNKS_PER_WORKER)))))
    order = token_length_order(model, texts)
    vectors = model.encode(
        list(texts) if order is None else [texts[i] for i in order],
        pool=pool,
        chunk_size=chunk,
        batch_size=batch_size,
        normalize_embeddings=normalize,
        convert_to_numpy=True,
        show_progress_bar=False,
    )
    if order is not None:
        in_order = np.empty_like(vectors)
        in_order[order] = vectors
        vectors = in_order
    return np.ascontiguousarray(vectors, dtype=np.float32)


def encode_shards_in_pool(
    model: Any, jobs: list[tuple[int, list[str]]], device: str, workers: int, batch_size: int
) -> Iterator[tuple[int, np.ndarray]]:
    """``(shard, vectors)`` of each job, one shard after the other, encoded by ``workers``
    processes of sentence-transformers' pool on babelspace's devices."""
    with encoding_pool(model, pool_devices(device, workers)) as pool:
        for i, texts in jobs:
            yield i, pool_encode(model, pool, texts, batch_size)
