"""Out-of-core top-k inner-product search over sharded embeddings.

The database is cut into chunks of ``plan.db_rows`` rows and the queries into chunks of
``plan.query_rows`` rows (both derived from the memory budget by
:func:`babelspace.mining.memory.plan_search`); every (database chunk, query chunk) block is searched
and each query's running top-k merged across chunks with
:func:`babelspace.retrieval.knn.merge_topk`. Exact search calls
:func:`babelspace.retrieval.knn.knn_search` on each block, the one kNN implementation.

Approximate indexes (faiss, inner product):

- ``ivf`` (``IndexIVFFlat``): a coarse quantiser of ``nlist`` centroids trained on a random sample
  of the database; the database is added shard by shard; a query scans the ``nprobe`` nearest lists.
  Similarities of the neighbours found are exact; neighbours in unvisited lists are missed.
- ``ivfpq`` (``IndexIVFPQ``): the same with vectors compressed to ``pq_m`` bytes (8-bit product
  quantisation), so a much larger database chunk fits the budget; the top-k similarities are then
  recomputed exactly from the shards, so margins are not distorted by the compression.

When the database chunk is smaller than the database, one index per chunk is built from the same
trained (empty) index, so memory stays bounded.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Literal

import numpy as np

from babelspace.errors import ResourceError
from babelspace.mining.memory import ChunkPlan
from babelspace.progress import Progress
from babelspace.retrieval.knn import Backend, knn_search, merge_topk
from babelspace.vectors.shards import Matrix

__all__ = [
    "IndexKind",
    "IvfSizes",
    "SearchOptions",
    "index_fixed_bytes",
    "index_row_bytes",
    "ivf_sizes",
    "sharded_knn",
]

logger = logging.getLogger(__name__)

IndexKind = Literal["flat", "ivf", "ivfpq"]
INDEX_KINDS = ("flat", "ivf", "ivfpq")


@dataclass
class SearchOptions:
    index: IndexKind = "flat"
    backend: Backend = "faiss"
    nlist: int | None = None  # default: about 4 * sqrt(database size)
    nprobe: int = 16
    pq_m: int | None = None  # default: dim // 8 bytes per vector (a divisor of dim)
    train_size: int | None = None  # default: 64 * nlist (at least 256 * 40 for ivfpq)
    seed: int = 0
    show_progress: bool = False


#: faiss's k-means warns below 39 training points per centroid: the default nlist keeps at least that many.
MIN_POINTS_PER_CENTROID = 39
#: Product-quantiser codebooks have 256 centroids (8-bit codes); train them on ~40 points each.
PQ_MIN_TRAIN_ROWS = 256 * 40
#: Default IVF training sample per inverted list (faiss's guideline is 30 to 256 points per centroid).
TRAIN_ROWS_PER_LIST = 64
#: Most rows copied from the shards and added to an IVF index per call (bounds the copy, fills BLAS).
MAX_ADD_ROWS = 8192


def default_nlist(n_db: int) -> int:
    return int(max(1, min(n_db // MIN_POINTS_PER_CENTROID, round(4 * math.sqrt(max(n_db, 1))))))


def default_pq_m(dim: int) -> int:
    target = max(1, dim // 8)
    for m in range(target, 0, -1):
        if dim % m == 0:
            return m
    return 1


def index_row_bytes(opts: SearchOptions, dim: int) -> int:
    """Bytes the index keeps per database row."""
    if opts.index == "flat":
        return 4 * dim
    if opts.index == "ivf":
        return 4 * dim + 8
    return (opts.pq_m or default_pq_m(dim)) + 8


@dataclass(frozen=True)
class IvfSizes:
    nlist: int
    train_rows: int  # training sample (at most a quarter of the budget)
    add_rows: int  # rows read from the shards and added to the index at a time


def ivf_sizes(opts: SearchOptions, dim: int, n_db: int, budget_bytes: int) -> IvfSizes:
    nlist = opts.nlist or default_nlist(n_db)
    want = opts.train_size or max(
        TRAIN_ROWS_PER_LIST * nlist, PQ_MIN_TRAIN_ROWS if opts.index == "ivfpq" else 0
    )
    cap = max(nlist, budget_bytes // 4 // (4 * dim))
    add_rows = max(1, min(MAX_ADD_ROWS, budget_bytes // 8 // (6 * dim)))
    return IvfSizes(nlist, int(min(n_db, want, cap)), int(add_rows))


def index_fixed_bytes(opts: SearchOptions, dim: int, n_db: int, budget_bytes: int) -> int:
    """Memory of an approximate index that does not grow with the database chunk: quantiser, PQ
    tables, the read buffer of the rows being added, and the training sample (held only while
    training, charged anyway)."""
    if opts.index == "flat":
        return 0
    sizes = ivf_sizes(opts, dim, n_db, budget_bytes)
    pq_tables = 256 * dim * 4 if opts.index == "ivfpq" else 0
    return sizes.nlist * dim * 4 + pq_tables + sizes.add_rows * dim * 6 + sizes.train_rows * dim * 4


def _empty_trained_index(database: Matrix, opts: SearchOptions, sizes: IvfSizes) -> object:
    import faiss

    m, d = len(database), database.dim
    nlist, ntrain = sizes.nlist, sizes.train_rows
    if nlist > m:
        raise ResourceError(
            f"--nlist {nlist} is larger than the database ({m} rows); lower it or use --index flat"
        )
    rng = np.random.default_rng(opts.seed)
    sample_ids = np.sort(rng.choice(m, size=ntrain, replace=False))
    sample = database.take(sample_ids)
    quantizer = faiss.IndexFlatIP(d)
    if opts.index == "ivf":
        index = faiss.IndexIVFFlat(quantizer, d, nlist, faiss.METRIC_INNER_PRODUCT)
    else:
        pq_m = opts.pq_m or default_pq_m(d)
        if d % pq_m:
            raise ResourceError(f"--pq-m {pq_m} must divide the embedding dimension {d}")
        if ntrain < 256:
            raise ResourceError(
                f"ivfpq needs at least 256 training vectors (8-bit codes), the database has {m}: use --index flat or ivf"
            )
        index = faiss.IndexIVFPQ(quantizer, d, nlist, pq_m, 8, faiss.METRIC_INNER_PRODUCT)
    logger.info("training %s index: nlist %d on %d vectors", opts.index, nlist, ntrain)
    index.train(sample)
    index.nprobe = min(opts.nprobe, nlist)
    return index  # faiss' Python wrapper keeps the quantiser referenced by the index


def _progress(total: int, desc: str, show: bool) -> Progress | None:
    """A bar over the (database chunk, query chunk) blocks: tqdm on a terminal, log lines otherwise."""
    return Progress(total=total, desc=desc, unit="block") if show else None


def sharded_knn(
    queries: Matrix,
    database: Matrix,
    k: int,
    plan: ChunkPlan,
    opts: SearchOptions | None = None,
    *,
    desc: str = "kNN search",
) -> tuple[np.ndarray, np.ndarray]:
    """Top-k database rows of every query row, chunk by chunk within ``plan``.

    Returns ``(sims, ids)``: float32 [n, k] descending and int64 [n, k]. With an IVF index a query
    may find fewer than k neighbours: the missing entries have id -1 and similarity -inf.
    """
    opts = opts or SearchOptions()
    if opts.index not in INDEX_KINDS:
        raise ValueError(f"unknown index {opts.index!r}; use one of {INDEX_KINDS}")
    if queries.dim != database.dim:
        raise ResourceError(f"dimension mismatch: queries are {queries.dim}-d, database {database.dim}-d")
    n, m = len(queries), len(database)
    k = min(k, m)
    best_sims = np.full((n, k), -np.inf, dtype=np.float32)
    best_ids = np.full((n, k), -1, dtype=np.int64)
    if n == 0 or m == 0 or k == 0:
        return best_sims, best_ids
    c, q = plan.db_rows, plan.query_rows
    n_blocks = math.ceil(m / c) * math.ceil(n / q)
    bar = _progress(n_blocks, desc, opts.show_progress)
    sizes = ivf_sizes(opts, database.dim, m, plan.budget_bytes) if opts.index != "flat" else None
    trained = _empty_trained_index(database, opts, sizes) if sizes is not None else None
    try:
        for db_start in range(0, m, c):
            db_stop = min(m, db_start + c)
            if trained is None:
                db_chunk = database.rows(db_start, db_stop)
                index = None
            else:
                import faiss

                from babelspace.retrieval.faiss_gpu import on_gpu

                db_chunk = None
                index = faiss.clone_index(trained)
                index.nprobe = trained.nprobe
                index = on_gpu(index)  # a GPU copy (nprobe included) when faiss has a GPU
                for _, piece in database.blocks(db_start, db_stop, sizes.add_rows):  # shard by shard
                    index.add(piece)
            for q_start in range(0, n, q):
                q_chunk = queries.rows(q_start, min(n, q_start + q))
                if index is None:
                    sims, ids = knn_search(
                        q_chunk, db_chunk, k, chunk_size=c, query_chunk_size=q, backend=opts.backend
                    )
                else:
                    sims, ids = index.search(q_chunk, k)
                    missing = ids < 0
                    sims[missing] = -np.inf
                    ids = ids.astype(np.int64)
                ids = np.where(ids >= 0, ids + db_start, -1)
                rows = slice(q_start, q_start + q_chunk.shape[0])
                best_sims[rows], best_ids[rows] = merge_topk(best_sims[rows], best_ids[rows], sims, ids, k)
                if bar is not None:
                    bar.update(1)
            del db_chunk, index
    finally:
        if bar is not None:
            bar.close()
    if opts.index == "ivfpq":
        _exact_rescore(queries, database, best_sims, best_ids, q)
    return best_sims, best_ids


def _exact_rescore(
    queries: Matrix, database: Matrix, sims: np.ndarray, ids: np.ndarray, query_rows: int
) -> None:
    """Replace PQ-approximate similarities of the found neighbours by exact ones, re-sorted (in place)."""
    n, k = ids.shape
    for start in range(0, n, query_rows):
        rows = slice(start, min(n, start + query_rows))
        q = queries.rows(rows.start, rows.stop)
        block_ids = ids[rows]
        valid = block_ids >= 0
        vecs = database.take(np.where(valid, block_ids, 0))
        exact = np.einsum("qd,qkd->qk", q, vecs.reshape(len(q), k, -1)).astype(np.float32)
        exact[~valid] = -np.inf
        order = np.lexsort((block_ids, -exact), axis=1)
        sims[rows] = np.take_along_axis(exact, order, axis=1)
        ids[rows] = np.take_along_axis(block_ids, order, axis=1)
