"""Exact k-nearest-neighbour search, margin scoring and margin candidates: the one shared implementation.

Evaluation (xsim, xsim++, BUCC) and mining reuse these functions and the one candidate type
(:class:`Candidates`, :func:`margin_candidates`, :func:`greedy_one_to_one`); nothing else in
babelspace should compute neighbourhoods, margins or candidate pairs on its own.

Margin scoring follows Artetxe & Schwenk, "Margin-based Parallel Corpus Mining with
Multilingual Sentence Embeddings" (ACL 2019, arXiv 1811.01136), as used by LASER's
``xsim`` and BUCC scripts::

    score(x, y) = margin(cos(x, y), (mean_k cos(x, NN_k(x)) + mean_k cos(y, NN_k(y))) / 2)

with ``ratio`` margin a / b, ``distance`` margin a - b and ``absolute`` margin a (plain cosine).
``NN_k(x)`` are the k nearest targets of source x, ``NN_k(y)`` the k nearest sources of target y.

Every search is an exact inner product. Pass L2-normalised vectors (see :func:`l2_normalize`) to get
cosine similarities. Memory is bounded by the chunk sizes, never by ``n x m``: the database is cut
into chunks of ``chunk_size`` rows (one faiss ``IndexFlatIP`` per chunk), the queries into chunks of
``query_chunk_size`` rows, and the running top-k of each query is merged across database chunks.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from enum import StrEnum
from typing import Literal

import numpy as np

logger = logging.getLogger(__name__)

Backend = Literal["faiss", "numpy"]
Retrieval = Literal["forward", "backward", "intersect", "max"]
RETRIEVALS: tuple[str, ...] = ("forward", "backward", "intersect", "max")

#: Lowest neighbourhood mean similarity used in a margin when a sentence has fewer than the
#: requested k neighbours (a corpus side smaller than k, or an IVF probe that found fewer). Such a
#: neighbourhood covers most of a tiny corpus, its mean is near the similarity of unrelated text, and
#: the ratio margin then inflates any pair (docs/mining.md, "k larger than the corpus"). With the floor a pair
#: needs cosine >= 0.53 to reach a ratio of 1.06.
NEIGHBOURHOOD_FLOOR = 0.5


class Margin(StrEnum):
    """How a cosine similarity is corrected by the neighbourhood similarities (a ``str`` enum)."""

    RATIO = "ratio"
    DISTANCE = "distance"
    ABSOLUTE = "absolute"


def _as_float32(x: np.ndarray, name: str) -> np.ndarray:
    arr = np.ascontiguousarray(x, dtype=np.float32)
    if arr.ndim != 2:
        raise ValueError(f"{name} must be a 2-D array [n, dim], got shape {arr.shape}")
    return arr


def l2_normalize(x: np.ndarray, eps: float = 1e-12) -> np.ndarray:
    """Return a float32 copy of ``x`` with every row scaled to unit L2 norm (zero rows stay zero)."""
    arr = np.array(x, dtype=np.float32, copy=True)
    if arr.ndim == 1:
        return arr / max(float(np.linalg.norm(arr)), eps)
    norms = np.linalg.norm(arr, axis=-1, keepdims=True)
    arr /= np.maximum(norms, eps)
    return arr


def merge_topk(
    best_sims: np.ndarray, best_ids: np.ndarray, sims: np.ndarray, ids: np.ndarray, k: int
) -> tuple[np.ndarray, np.ndarray]:
    """Merge two [q, *] candidate lists into the k best per row (ties: lower id first).

    Used by :func:`knn_search` across database chunks, and by out-of-core mining across shards.
    """
    all_sims = np.concatenate([best_sims, sims], axis=1)
    all_ids = np.concatenate([best_ids, ids], axis=1)
    # lexsort: last key is primary. Sort by descending similarity, then ascending id.
    order = np.lexsort((all_ids, -all_sims), axis=1)[:, :k]
    return np.take_along_axis(all_sims, order, axis=1), np.take_along_axis(all_ids, order, axis=1)


def _chunk_topk_numpy(q: np.ndarray, db: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    sims = q @ db.T
    if k < sims.shape[1]:
        part = np.argpartition(-sims, k - 1, axis=1)[:, :k]
    else:
        part = np.broadcast_to(np.arange(sims.shape[1]), sims.shape).copy()
    part_sims = np.take_along_axis(sims, part, axis=1)
    order = np.lexsort((part, -part_sims), axis=1)
    return np.take_along_axis(part_sims, order, axis=1), np.take_along_axis(part, order, axis=1)


def knn_search(
    queries: np.ndarray,
    database: np.ndarray,
    k: int,
    *,
    chunk_size: int = 16384,
    query_chunk_size: int = 1024,
    backend: Backend = "faiss",
    show_progress: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """Exact top-k inner-product search of ``queries`` in ``database``.

    Args:
        queries: [n, d] array (normalise it first for cosine).
        database: [m, d] array.
        k: neighbours per query; clamped to ``m`` when the database is smaller.
        chunk_size: database rows per chunk (one ``IndexFlatIP`` each with faiss).
        query_chunk_size: query rows searched at once.
        backend: ``"faiss"`` (faiss-cpu, or a GPU build's GPU index:
            :mod:`babelspace.retrieval.faiss_gpu`) or ``"numpy"`` (plain matrix products); both are exact.
        show_progress: progress over database chunks (:class:`babelspace.progress.Progress`: a bar
            on a terminal, log lines otherwise), for large searches.

    Returns:
        ``(sims, ids)``: float32 [n, k] similarities in descending order and int64 [n, k]
        database row indices.
    """
    q = _as_float32(queries, "queries")
    db = _as_float32(database, "database")
    if q.shape[1] != db.shape[1]:
        raise ValueError(f"dimension mismatch: queries have {q.shape[1]}, database has {db.shape[1]}")
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    if chunk_size < 1 or query_chunk_size < 1:
        raise ValueError("chunk sizes must be >= 1")
    if backend not in ("faiss", "numpy"):
        raise ValueError(f"unknown backend {backend!r}; use 'faiss' or 'numpy'")
    n, m = q.shape[0], db.shape[0]
    k = min(k, m)
    best_sims = np.full((n, k), -np.inf, dtype=np.float32)
    best_ids = np.full((n, k), -1, dtype=np.int64)
    if n == 0 or m == 0:
        return best_sims[:, :k], best_ids[:, :k]

    if backend == "faiss":
        import faiss  # imported lazily: the numpy backend works without it

        from babelspace.retrieval.faiss_gpu import on_gpu

    starts = range(0, m, chunk_size)
    if show_progress:
        from babelspace.progress import Progress

        starts = Progress(starts, desc="kNN search", unit="chunk")
    for db_start in starts:
        db_chunk = db[db_start : db_start + chunk_size]
        kc = min(k, db_chunk.shape[0])
        index = None
        if backend == "faiss":
            index = on_gpu(faiss.IndexFlatIP(db.shape[1]))  # the CPU index unless faiss has a GPU
            index.add(db_chunk)
        for q_start in range(0, n, query_chunk_size):
            q_chunk = q[q_start : q_start + query_chunk_size]
            if index is not None:
                sims, ids = index.search(q_chunk, kc)
                ids = ids.astype(np.int64)
            else:
                sims, ids = _chunk_topk_numpy(q_chunk, db_chunk, kc)
            ids = ids + db_start
            rows = slice(q_start, q_start + q_chunk.shape[0])
            best_sims[rows], best_ids[rows] = merge_topk(best_sims[rows], best_ids[rows], sims, ids, k)
    return best_sims, best_ids


def mean_knn_sim(
    queries: np.ndarray,
    database: np.ndarray,
    k: int,
    *,
    chunk_size: int = 16384,
    query_chunk_size: int = 1024,
    backend: Backend = "faiss",
    show_progress: bool = False,
) -> np.ndarray:
    """Mean similarity of each query to its k nearest database rows: float32 [n]."""
    sims, _ = knn_search(
        queries,
        database,
        k,
        chunk_size=chunk_size,
        query_chunk_size=query_chunk_size,
        backend=backend,
        show_progress=show_progress,
    )
    return sims.mean(axis=1, dtype=np.float64).astype(np.float32)


def margin_score(
    cos: np.ndarray | float,
    fwd_mean: np.ndarray | float,
    bwd_mean: np.ndarray | float,
    margin: Margin | str = Margin.RATIO,
) -> np.ndarray:
    """Margin-corrected similarity (arrays broadcast).

    ``ratio``: cos / ((fwd + bwd) / 2); ``distance``: cos - (fwd + bwd) / 2; ``absolute``: cos.
    ``fwd_mean`` is the source's mean similarity to its k nearest targets, ``bwd_mean`` the target's
    mean similarity to its k nearest sources.
    """
    margin = Margin(margin)
    cos = np.asarray(cos, dtype=np.float32)
    if margin is Margin.ABSOLUTE:
        return cos
    denom = (np.asarray(fwd_mean, dtype=np.float32) + np.asarray(bwd_mean, dtype=np.float32)) / 2
    if margin is Margin.RATIO:
        return cos / denom
    return cos - denom


def masked_mean(sims: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Row means of the similarities whose id is valid (>= 0); 0 for a row without any."""
    valid = ids >= 0
    total = np.where(valid, sims, 0.0).sum(axis=1, dtype=np.float64)
    count = valid.sum(axis=1)
    return (total / np.maximum(count, 1)).astype(np.float32)


def neighbourhood_mean(sims: np.ndarray, ids: np.ndarray, k: int | None = None) -> np.ndarray:
    """:func:`masked_mean`, floored at :data:`NEIGHBOURHOOD_FLOOR` for rows with fewer than ``k``
    valid neighbours (no floor when ``k`` is None)."""
    mean = masked_mean(sims, ids)
    if k is None:
        return mean
    small = (ids >= 0).sum(axis=1) < k
    return np.where(small, np.maximum(mean, NEIGHBOURHOOD_FLOOR), mean).astype(np.float32)


def score_neighbours(
    sims: np.ndarray, ids: np.ndarray, own_mean: np.ndarray, other_mean: np.ndarray, margin: Margin | str
) -> np.ndarray:
    """Margin scores of [n, w] neighbour lists: row i's neighbour ``ids[i, j]`` is scored with
    :func:`margin_score` of ``sims[i, j]``, ``own_mean[i]`` and ``other_mean[ids[i, j]]``; ``-inf``
    where the id is missing (-1)."""
    scores = margin_score(sims, own_mean[:, None], other_mean[np.maximum(ids, 0)], margin)
    return np.where(ids >= 0, scores, -np.inf)


def margin_knn(
    src: np.ndarray,
    tgt: np.ndarray,
    k: int = 4,
    margin: Margin | str = Margin.RATIO,
    candidates: int | None = None,
    *,
    chunk_size: int = 16384,
    query_chunk_size: int = 1024,
    backend: Backend = "faiss",
    show_progress: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """For each source row, its candidate targets re-scored by margin, best first.

    The candidates are the ``candidates`` (default ``k``) nearest targets by inner product
    (src -> tgt search); each is re-scored with :func:`margin_score`, using the source's mean
    similarity to its k nearest targets and the target's mean similarity to its k nearest sources
    (tgt -> src search). Pass L2-normalised arrays. This is the scoring of LASER's xsim and of
    margin-based mining (Artetxe & Schwenk 2019).

    Returns:
        ``(scores, ids)``: float32 [n, c] margin scores sorted descending and int64 [n, c] target
        indices, ``c = min(candidates, len(tgt))``.
    """
    margin = Margin(margin)
    c = k if candidates is None else candidates
    if c < 1:
        raise ValueError(f"candidates must be >= 1, got {c}")
    opts = {
        "chunk_size": chunk_size,
        "query_chunk_size": query_chunk_size,
        "backend": backend,
        "show_progress": show_progress,
    }
    fwd_sims, fwd_ids = knn_search(src, tgt, max(k, c), **opts)
    c = min(c, fwd_sims.shape[1])
    cand_sims, cand_ids = fwd_sims[:, :c], fwd_ids[:, :c]
    if margin is Margin.ABSOLUTE:
        return cand_sims.copy(), cand_ids.copy()
    fwd_mean = masked_mean(fwd_sims[:, :k], fwd_ids[:, :k])
    bwd_mean = mean_knn_sim(tgt, src, k, **opts)
    scores = score_neighbours(cand_sims, cand_ids, fwd_mean, bwd_mean, margin)
    order = np.argsort(-scores, axis=1, kind="stable")
    return np.take_along_axis(scores, order, axis=1), np.take_along_axis(cand_ids, order, axis=1)


def greedy_one_to_one(src: np.ndarray, tgt: np.ndarray, scores: np.ndarray) -> np.ndarray:
    """Indices of the pairs kept by greedy one-to-one selection, best score first.

    Pairs are visited by descending score (stable: earlier pairs win ties); a pair is kept when
    neither its source nor its target was kept already.
    """
    src = np.asarray(src, dtype=np.int64)
    tgt = np.asarray(tgt, dtype=np.int64)
    if len(src) == 0:
        return np.zeros(0, dtype=np.int64)
    order = np.argsort(-np.asarray(scores), kind="stable")
    used_src = np.zeros(int(src.max()) + 1, dtype=bool)
    used_tgt = np.zeros(int(tgt.max()) + 1, dtype=bool)
    keep: list[int] = []
    for idx, s, t in zip(order.tolist(), src[order].tolist(), tgt[order].tolist(), strict=True):
        if used_src[s] or used_tgt[t]:
            continue
        used_src[s] = True
        used_tgt[t] = True
        keep.append(idx)
    return np.asarray(keep, dtype=np.int64)


# --------------------------------------------------------------------------- candidate pairs


@dataclass
class Candidates:
    """Candidate pairs (source row, target row, margin score): BUCC, xsim and mining share this type."""

    src: np.ndarray
    tgt: np.ndarray
    scores: np.ndarray

    def __len__(self) -> int:
        return len(self.scores)

    def subset(self, keep: np.ndarray) -> Candidates:
        return Candidates(self.src[keep], self.tgt[keep], self.scores[keep])

    def pairs(self) -> list[tuple[int, int]]:
        return list(zip(self.src.tolist(), self.tgt.tolist(), strict=True))


def _best(scores: np.ndarray, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(row, best id, best score) for every row that has at least one valid neighbour."""
    col = np.argmax(scores, axis=1)
    rows = np.arange(scores.shape[0])
    best_scores = scores[rows, col]
    best_ids = ids[rows, col]
    ok = (best_ids >= 0) & np.isfinite(best_scores)
    return rows[ok].astype(np.int64), best_ids[ok].astype(np.int64), best_scores[ok].astype(np.float32)


def margin_candidates(
    fwd_sims: np.ndarray,
    fwd_ids: np.ndarray,
    bwd_sims: np.ndarray,
    bwd_ids: np.ndarray,
    margin: Margin | str = Margin.RATIO,
    retrieval: Retrieval = "max",
    k: int | None = None,
) -> Candidates:
    """Margin-score the k nearest neighbours both ways and pool them by ``retrieval``.

    Retrieval modes as in LASER's ``mine_bitexts`` (Artetxe & Schwenk 2019, section 3): ``forward``
    every source with its best target by margin, ``backward`` every target with its best source,
    ``intersect`` the pairs that are each other's best, ``max`` the union of forward and backward (the
    BUCC protocol's pool). ``fwd_*`` are the [n, k] nearest targets of every source, ``bwd_*`` the
    [m, k] nearest sources of every target (ids -1 for missing neighbours). A pair's score is
    :func:`margin_score` of its cosine with the source's and the target's mean neighbour similarity;
    the neighbourhood size is the lists' width. ``k``: the requested neighbourhood size; rows with
    fewer valid neighbours get a floored mean (:func:`neighbourhood_mean`).
    """
    if retrieval not in RETRIEVALS:
        raise ValueError(f"unknown retrieval {retrieval!r}; use one of {RETRIEVALS}")
    fwd_mean = neighbourhood_mean(fwd_sims, fwd_ids, k)
    bwd_mean = neighbourhood_mean(bwd_sims, bwd_ids, k)
    empty = Candidates(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.float32))
    parts: list[Candidates] = []
    if retrieval in ("forward", "max", "intersect") and fwd_ids.size:
        rows, best, score = _best(score_neighbours(fwd_sims, fwd_ids, fwd_mean, bwd_mean, margin), fwd_ids)
        parts.append(Candidates(rows, best, score))
    if retrieval in ("backward", "max", "intersect") and bwd_ids.size:
        rows, best, score = _best(score_neighbours(bwd_sims, bwd_ids, bwd_mean, fwd_mean, margin), bwd_ids)
        parts.append(Candidates(best, rows, score))
    if not parts or (retrieval == "intersect" and len(parts) < 2):
        return empty
    if retrieval == "intersect":
        fwd, bwd = parts
        bwd_pairs = set(zip(bwd.src.tolist(), bwd.tgt.tolist(), strict=True))
        return fwd.subset(np.array([p in bwd_pairs for p in fwd.pairs()], dtype=bool))
    return Candidates(
        np.concatenate([p.src for p in parts]),
        np.concatenate([p.tgt for p in parts]),
        np.concatenate([p.scores for p in parts]),
    )


def mutual_margin_candidates(
    src: np.ndarray,
    tgt: np.ndarray,
    k: int = 4,
    margin: Margin | str = Margin.RATIO,
    retrieval: Retrieval = "max",
    *,
    backend: Backend = "faiss",
    chunk_size: int = 16384,
) -> Candidates:
    """:func:`margin_candidates` of in-memory arrays: two exact searches (src -> tgt, tgt -> src),
    each giving both the candidate list and the neighbourhood mean. Pass L2-normalised arrays."""
    fwd_sims, fwd_ids = knn_search(src, tgt, k, backend=backend, chunk_size=chunk_size)
    bwd_sims, bwd_ids = knn_search(tgt, src, k, backend=backend, chunk_size=chunk_size)
    return margin_candidates(fwd_sims, fwd_ids, bwd_sims, bwd_ids, margin, retrieval)
