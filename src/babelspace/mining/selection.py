"""Candidate pairs from margin-scored neighbour lists, and the greedy one-to-one selection.

Retrieval modes (as in LASER's ``mine_bitexts``, Artetxe & Schwenk 2019):

- ``forward``: every source with its best target by margin;
- ``backward``: every target with its best source;
- ``intersect``: only pairs that are each other's best (forward and backward agree);
- ``max``: the union of forward and backward candidates (the BUCC protocol's pool).

The pool is then made one-to-one greedily: sorted by descending score, a pair is kept only if neither
its source nor its target was kept before (:func:`greedy_one_to_one`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from babelspace.evaluation.knn import Margin, greedy_one_to_one, margin_score

__all__ = [
    "NEIGHBOURHOOD_FLOOR",
    "RETRIEVALS",
    "Candidates",
    "greedy_one_to_one",
    "margin_candidates",
    "masked_mean",
]

Retrieval = Literal["forward", "backward", "intersect", "max"]
RETRIEVALS = ("forward", "backward", "intersect", "max")

#: Lowest neighbourhood mean similarity used in a margin when a sentence has fewer than the
#: requested k neighbours (a corpus side smaller than k, or an IVF probe that found fewer). Such a
#: neighbourhood covers most of a tiny corpus, its mean is near the similarity of unrelated text
#: (about 0.05 for minilm), and the ratio margin then inflates any pair (cosine 0.058 scored 2.65).
#: With the floor a pair needs cosine >= 0.53 to reach a ratio of 1.06.
NEIGHBOURHOOD_FLOOR = 0.5


@dataclass
class Candidates:
    """Candidate pairs (source row, target row, margin score)."""

    src: np.ndarray
    tgt: np.ndarray
    scores: np.ndarray

    def __len__(self) -> int:
        return len(self.scores)

    def subset(self, keep: np.ndarray) -> Candidates:
        return Candidates(self.src[keep], self.tgt[keep], self.scores[keep])

    def pairs(self) -> list[tuple[int, int]]:
        return list(zip(self.src.tolist(), self.tgt.tolist(), strict=True))


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

    ``fwd_*`` are the [n, k] nearest targets of every source, ``bwd_*`` the [m, k] nearest sources of
    every target (ids -1 for missing neighbours). A pair's score is
    :func:`babelspace.evaluation.knn.margin_score` of its cosine with the source's and the target's
    mean neighbour similarity; the neighbourhood size is the lists' width. ``k``: the requested
    neighbourhood size; rows with fewer valid neighbours get a floored mean
    (:func:`neighbourhood_mean`).
    """
    if retrieval not in RETRIEVALS:
        raise ValueError(f"unknown retrieval {retrieval!r}; use one of {RETRIEVALS}")
    fwd_mean = neighbourhood_mean(fwd_sims, fwd_ids, k)
    bwd_mean = neighbourhood_mean(bwd_sims, bwd_ids, k)
    empty = Candidates(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.float32))
    parts: list[Candidates] = []
    if retrieval in ("forward", "max", "intersect") and fwd_ids.size:
        s = margin_score(fwd_sims, fwd_mean[:, None], bwd_mean[np.maximum(fwd_ids, 0)], margin)
        s = np.where(fwd_ids >= 0, s, -np.inf)
        rows, best, score = _best(s, fwd_ids)
        parts.append(Candidates(rows, best, score))
    if retrieval in ("backward", "max", "intersect") and bwd_ids.size:
        s = margin_score(bwd_sims, bwd_mean[:, None], fwd_mean[np.maximum(bwd_ids, 0)], margin)
        s = np.where(bwd_ids >= 0, s, -np.inf)
        rows, best, score = _best(s, bwd_ids)
        parts.append(Candidates(best, rows, score))
    if not parts:
        return empty
    if retrieval == "intersect":
        if len(parts) < 2:
            return empty
        fwd, bwd = parts
        bwd_pairs = set(zip(bwd.src.tolist(), bwd.tgt.tolist(), strict=True))
        keep = np.array([p in bwd_pairs for p in fwd.pairs()], dtype=bool)
        return fwd.subset(keep)
    return Candidates(
        np.concatenate([p.src for p in parts]),
        np.concatenate([p.tgt for p in parts]),
        np.concatenate([p.scores for p in parts]),
    )
