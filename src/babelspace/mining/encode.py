"""Encode a sentence list into the shards of a :class:`~babelspace.vectors.shards.ShardStore`.

Three executors produce the same shard files (the driver process writes every shard; workers only
encode, so no shared filesystem is needed):

- ``local``: in this process, one model;
- ``processes``: ``workers`` local processes of sentence-transformers' multi-process pool
  (:mod:`babelspace.mining.pool`), sharing each shard in turn; on a multi-GPU host each worker takes
  its own GPU (:func:`babelspace.mining.devices.worker_devices`), on the CPU the torch threads are
  split between them. The onnx and openvino backends keep babelspace's own pool of *spawn*
  processes, each loading the model once and encoding whole shards: sentence-transformers' pool sends
  the parent's model to its workers by pickling it, which suits torch weights (shared memory) but
  not an exported runtime session, and this environment has no optimum to try it with;
- ``ray``: a ``ray.data`` pipeline whose ``map_batches`` runs on an actor pool of ``workers``
  actors, one model per actor, one shard per batch (``pip install 'babelspace[ray]'``); it connects to
  a running cluster with ``ray_address`` (or ``RAY_ADDRESS``) and otherwise starts a local instance.
  ``ray_gpus_per_worker`` reserves GPUs for each actor (Ray then shows each actor only its own).

Only the shards the store misses are encoded, so an interrupted run resumes where it stopped.
With ``show_progress`` a :class:`babelspace.progress.Progress` counts the sentences to encode (a bar on
a terminal, a log line every 30 s otherwise); the local executor advances it every few batches, the
others once per shard.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from babelspace.errors import ResourceError
from babelspace.vectors.shards import Manifest, ShardStore
from babelspace.writable import remove_stale_temporaries

__all__ = ["EncodeOptions", "encode_in_workers", "encode_to_shards", "ray_available"]

logger = logging.getLogger(__name__)

Executor = Literal["local", "processes", "ray"]


@dataclass
class EncodeOptions:
    batch_size: int = 64
    shard_size: int = 10000
    fp16: bool = False
    executor: Executor = "local"
    workers: int = 1
    ray_address: str | None = None
    max_seq_length: int | None = None
    show_progress: bool = False
    backend: str = "torch"  # torch | onnx | openvino (babelspace.models.backends)
    device: str = "auto"  # babelspace.device.resolve_device
    quantize: str = "none"  # none | int8
    ray_gpus_per_worker: float = 0.0  # GPUs Ray reserves for each actor (fractions share a GPU)

    def __post_init__(self) -> None:
        if not self.ray_gpus_per_worker >= 0:
            raise ResourceError(f"--ray-gpus-per-worker must be 0 or more, not {self.ray_gpus_per_worker}")

    @property
    def dtype(self) -> str:
        return "float16" if self.fp16 else "float32"


def ray_available() -> bool:
    try:
        import ray  # noqa: F401
        import ray.data  # noqa: F401
    except ImportError:
        return False
    return True


# ----------------------------------------------------------------------------- local
def _load(
    spec: str,
    max_seq_length: int | None,
    backend: str = "torch",
    quantize: str = "none",
    device: str = "auto",
) -> Any:
    from babelspace.models.backends import load_backend_encoder

    return load_backend_encoder(spec, backend, quantize, device=device, max_seq_length=max_seq_length)


def _encode_texts(model: Any, texts: Sequence[str], batch_size: int) -> np.ndarray:
    from babelspace.models.encoder import encode

    return encode(model, texts, batch_size=batch_size, show_progress=False, normalize=True)


#: Batches encoded between two progress updates of the local executor (a shard is 10,000 sentences by
#: default: minutes on a CPU, too long to leave a bar standing still).
PROGRESS_BATCHES = 8


def _run_local(
    model: Any,
    jobs: list[tuple[int, list[str]]],
    opts: EncodeOptions,
    advance: Callable[[int], None] | None = None,
) -> Iterator[tuple[int, np.ndarray]]:
    """Encode each shard in this process; ``advance(rows)`` after every ``PROGRESS_BATCHES`` batches."""
    step = max(1, opts.batch_size * PROGRESS_BATCHES)
    for i, texts in jobs:
        pieces = []
        for s in range(0, len(texts), step):
            pieces.append(_encode_texts(model, texts[s : s + step], opts.batch_size))
            if advance is not None:
                advance(len(pieces[-1]))
        yield i, np.concatenate(pieces) if len(pieces) > 1 else pieces[0]


# ----------------------------------------------------------------------------- process pool
_WORKER_MODEL: Any = None
_WORKER_BATCH = 64


def _pool_init(
    spec: str,
    max_seq_length: int | None,
    batch_size: int,
    threads: int,
    backend: str,
    quantize: str,
    devices: Any,
) -> None:
    """Load the worker's model on the next device of the ``devices`` queue (one per worker)."""
    global _WORKER_MODEL, _WORKER_BATCH
    import torch

    torch.set_num_threads(threads)
    _WORKER_MODEL = _load(spec, max_seq_length, backend, quantize, devices.get())
    _WORKER_BATCH = batch_size


def _pool_encode(job: tuple[int, list[str]]) -> tuple[int, np.ndarray]:
    i, texts = job
    return i, _encode_texts(_WORKER_MODEL, texts, _WORKER_BATCH)


def _run_processes(
    model: Any, spec: str, jobs: list[tuple[int, list[str]]], opts: EncodeOptions
) -> Iterator[tuple[int, np.ndarray]]:
    """The shards of ``jobs`` from local worker processes: sentence-transformers' pool for a torch
    model (one shard at a time over all workers), else babelspace's own pool (whole shards)."""
    if opts.backend == "torch":
        from babelspace.mining.pool import encode_shards_in_pool

        return encode_shards_in_pool(model, jobs, opts.device, opts.workers, opts.batch_size)
    return _run_backend_processes(spec, jobs, opts)


def _run_backend_processes(
    spec: str, jobs: list[tuple[int, list[str]]], opts: EncodeOptions
) -> Iterator[tuple[int, np.ndarray]]:
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor, as_completed

    from babelspace.mining.devices import threads_per_worker, worker_devices

    workers = max(1, min(opts.workers, len(jobs)))
    devices = worker_devices(opts.device, workers)
    context = mp.get_context("spawn")
    queue = context.Queue()
    for device in devices:
        queue.put(device)
    logger.info("encoding workers on %s", ", ".join(devices))
    with ProcessPoolExecutor(
        max_workers=workers,
        mp_context=context,
        initializer=_pool_init,
        initargs=(
            spec,
            opts.max_seq_length,
            opts.batch_size,
            threads_per_worker(devices),
            opts.backend,
            opts.quantize,
            queue,
        ),
    ) as pool:
        futures = [pool.submit(_pool_encode, job) for job in jobs]
        for fut in as_completed(futures):
            yield fut.result()


def encode_in_workers(
    texts: Sequence[str], model_spec: str, opts: EncodeOptions, normalize: bool = True
) -> np.ndarray:
    """``texts`` encoded by ``opts.workers`` processes, one device each (``babelspace encode
    --workers``); rows in input order. A torch model is loaded once, on the CPU, and encoded by
    sentence-transformers' pool (``normalize``: unit vectors, else the model's own output); the
    other backends by babelspace's pool, in chunks of at most ``opts.shard_size`` (unit vectors)."""
    if opts.backend == "torch":
        from babelspace.mining.pool import encoding_pool, pool_devices, pool_encode

        model = _load(model_spec, opts.max_seq_length, device="cpu")
        with encoding_pool(model, pool_devices(opts.device, opts.workers)) as pool:
            return pool_encode(model, pool, texts, opts.batch_size, normalize=normalize)
    size = max(1, min(opts.shard_size, -(-len(texts) // (opts.workers * 4))))
    jobs = [(i, list(texts[s : s + size])) for i, s in enumerate(range(0, len(texts), size))]
    parts = dict(_run_backend_processes(model_spec, jobs, opts))
    return np.concatenate([parts[i] for i in range(len(jobs))])


# ----------------------------------------------------------------------------- ray
class _RayShardEncoder:
    """A ``ray.data`` actor: loads the model once, encodes one shard per batch."""

    def __init__(
        self,
        spec: str,
        max_seq_length: int | None,
        batch_size: int,
        threads: int,
        backend: str = "torch",
        quantize: str = "none",
        device: str = "auto",
    ) -> None:
        import torch

        torch.set_num_threads(threads)
        self.model = _load(spec, max_seq_length, backend, quantize, device)
        self.batch_size = batch_size

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        shards, embs, rows, dims = [], [], [], []
        for shard, texts in zip(batch["shard"], batch["texts"], strict=True):
            emb = _encode_texts(self.model, [str(t) for t in texts], self.batch_size)
            shards.append(int(shard))
            embs.append(emb.tobytes())
            rows.append(emb.shape[0])
            dims.append(emb.shape[1])
        return {
            "shard": np.asarray(shards, dtype=np.int64),
            "emb": np.asarray(embs, dtype=object),
            "rows": np.asarray(rows, dtype=np.int64),
            "dim": np.asarray(dims, dtype=np.int64),
        }


def _run_ray(
    spec: str, jobs: list[tuple[int, list[str]]], opts: EncodeOptions
) -> Iterator[tuple[int, np.ndarray]]:
    if not ray_available():
        raise ResourceError(
            "the ray executor needs ray: pip install 'babelspace[ray]' (or pip install 'ray[data]')"
        )
    import ray
    import ray.data

    started_here = False
    if not ray.is_initialized():
        address = opts.ray_address or os.environ.get("RAY_ADDRESS")
        if address:
            ray.init(address=address, log_to_driver=False)
        else:
            ray.init(num_cpus=max(1, opts.workers), include_dashboard=False, log_to_driver=False)
            started_here = True
    workers = max(1, min(opts.workers, len(jobs)))
    try:
        ds = ray.data.from_items([{"shard": i, "texts": texts} for i, texts in jobs])
        ds = ds.map_batches(
            _RayShardEncoder,
            fn_constructor_args=(
                spec,
                opts.max_seq_length,
                opts.batch_size,
                1,
                opts.backend,
                opts.quantize,
                opts.device,
            ),
            batch_size=1,
            batch_format="numpy",
            concurrency=workers,
            num_cpus=1,
            **({"num_gpus": opts.ray_gpus_per_worker} if opts.ray_gpus_per_worker else {}),
        )
        for batch in ds.iter_batches(batch_size=1, batch_format="numpy"):
            for shard, buf, rows, dim in zip(
                batch["shard"], batch["emb"], batch["rows"], batch["dim"], strict=True
            ):
                emb = np.frombuffer(buf, dtype=np.float32).reshape(int(rows), int(dim))
                yield int(shard), emb
    finally:
        if started_here:
            ray.shutdown()


# ----------------------------------------------------------------------------- entry point
def encode_to_shards(
    texts: Sequence[str],
    store: ShardStore,
    model_spec: str,
    fingerprint: str,
    opts: EncodeOptions,
    *,
    model: Any = None,
    desc: str = "encode",
    identity: str | None = None,
) -> dict[str, Any]:
    """Make ``store`` hold the embeddings of ``texts``; encode only the missing shards.

    ``model`` (an already loaded SentenceTransformer of ``model_spec``) avoids a second load in the
    ``local`` executor. Raises :class:`ResourceError` when the store belongs to another model,
    dimension or input (see :meth:`ShardStore.check`). ``identity`` (default ``model_spec``) is what
    the shards are keyed by: :func:`babelspace.mining.guards.shard_identity` includes the model's
    content hash. Returns what was done (shards encoded/reused).
    """
    identity = identity or model_spec
    from babelspace.models.encoder import embedding_dim

    n = len(texts)
    remove_stale_temporaries(store.directory)  # what a run killed while writing here left
    have = store.read_manifest()
    n_shards = (n + opts.shard_size - 1) // opts.shard_size
    if (
        have is not None
        and have.model == identity
        and have.n == n
        and have.fingerprint == fingerprint
        and have.dtype == opts.dtype
        and have.shard_size == opts.shard_size
    ):
        missing = store.missing_shards(texts)
        if not missing:
            logger.info("%s: all %d shards present, nothing to encode", store.directory, n_shards)
            return {"shards": n_shards, "encoded": 0, "reused": n_shards, "dim": have.dim}
    if model is None:  # the pool's workers get it from here: loaded once, on the CPU
        device = "cpu" if opts.executor == "processes" else opts.device
        model = _load(model_spec, opts.max_seq_length, opts.backend, opts.quantize, device)
    dim = embedding_dim(model)
    store.initialise(Manifest(identity, dim, opts.dtype, opts.shard_size, n, fingerprint))
    missing = store.missing_shards(texts)
    jobs = [(i, list(texts[slice(*store.bounds(i))])) for i in missing]
    if jobs:
        logger.info(
            "%s: encoding %d of %d shards (%s executor, %d worker(s))",
            store.directory,
            len(jobs),
            n_shards,
            opts.executor,
            opts.workers,
        )
    bar = _progress_bar(sum(len(t) for _, t in jobs), desc) if opts.show_progress and jobs else None
    results = _results(model, model_spec, jobs, opts, bar)
    try:
        _write_results(results, store, texts, dim, bar, opts.executor)
    finally:
        getattr(results, "close", lambda: None)()  # stops the workers, also on an error or Ctrl-C
        if bar is not None:
            bar.close()
    return {"shards": n_shards, "encoded": len(jobs), "reused": n_shards - len(jobs), "dim": dim}


def _progress_bar(total: int, desc: str) -> Any:
    from babelspace.progress import Progress

    return Progress(total=total, desc=desc, unit="sent")


def _results(
    model: Any, model_spec: str, jobs: list[tuple[int, list[str]]], opts: EncodeOptions, bar: Any
) -> Iterator[tuple[int, np.ndarray]]:
    """The (shard, vectors) pairs of ``jobs`` from the configured executor."""
    if opts.executor == "local" or not jobs:
        return _run_local(model, jobs, opts, bar.update if bar is not None else None)
    if opts.executor == "processes":
        return _run_processes(model, model_spec, jobs, opts)
    if opts.executor == "ray":
        return _run_ray(model_spec, jobs, opts)
    raise ValueError(f"unknown executor {opts.executor!r}; use local, processes or ray")


def _write_results(
    results: Iterator[tuple[int, np.ndarray]],
    store: ShardStore,
    texts: Sequence[str],
    dim: int,
    bar: Any,
    executor: str,
) -> None:
    """Write every shard as it arrives; the bar advances per shard (the local executor advances it
    itself, per few batches)."""
    for i, emb in results:
        if emb.shape[1] != dim:
            raise ResourceError(f"worker returned {emb.shape[1]}-d vectors for a {dim}-d model")
        store.write_shard(i, emb, texts[slice(*store.bounds(i))])
        if bar is not None and executor != "local":
            bar.update(emb.shape[0])
