"""Apportionment: how many places of a stream of batches each group gets, in proportion to its
weight, by the Sainte-Laguë divisor method (place after place to the group with the smallest
``(c_g + 1/2) / w_g``, ties to the earlier group), with the count after any number of places in
closed form (`seats`), so a resumed run draws exactly the batches of the uninterrupted one; and the
weighted subsamples that use the same shares (:mod:`babelspace.data.sampling`).
"""

from __future__ import annotations

import random
from collections.abc import Hashable, Mapping

import numpy as np

__all__ = [
    "MAX_SEED",
    "group_members",
    "group_weight_array",
    "seats",
    "stratified_sample",
    "weighted_sample_indices",
]

#: The largest seed numpy's generators take (``np.random.default_rng``, ``np.random.seed``: 0 to 2**32 - 1);
#: every ``--seed`` is checked against it when its config is built.
MAX_SEED = 2**32 - 1


def _price(j: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Sainte-Laguë price of the j-th place (0-based) of each group: (j + 1/2) / w."""
    return (j.astype(np.float64) + 0.5) / weights


def _count_below(level: float, weights: np.ndarray) -> np.ndarray:
    """Per group, the number of places whose price is strictly below ``level``."""
    c = np.maximum(np.ceil(level * weights - 0.5), 0).astype(np.int64)
    while True:  # exact against _price whatever the rounding of the estimate
        high = (c > 0) & (_price(c - 1, weights) >= level)
        low = _price(c, weights) < level
        if not (high.any() or low.any()):
            return c
        c = c - high + low


def seats(places: int, weights: np.ndarray) -> np.ndarray:
    """Places each group holds after the first ``places`` of the stream (closed form).

    The stream hands place after place to the group with the smallest ``(c_g + 1/2) / w_g`` (ties to
    the lower group index). Equal weights give round-robin: place p goes to group ``p % n``.
    """
    n = len(weights)
    if places <= 0:
        return np.zeros(n, dtype=np.int64)
    total = float(weights.sum())
    margin = n / 2 + 1
    low = max(0.0, (places - margin) / total)
    high = (places + margin) / total
    below = _count_below(low, weights)
    extra = np.ceil((high - low) * weights).astype(np.int64) + 2
    groups = np.repeat(np.arange(n), extra)
    offsets = np.arange(int(extra.sum())) - np.repeat(np.cumsum(extra) - extra, extra)
    j = below[groups] + offsets
    order = np.lexsort((groups, _price(j, weights[groups])))
    need = places - int(below.sum())
    if not 0 <= need <= len(order):  # cannot happen with the margin above; guard against float surprises
        raise RuntimeError(f"sampler schedule: {need} places to place among {len(order)} candidates")
    return below + np.bincount(groups[order[:need]], minlength=n)


def group_weight_array(names: list[Hashable], given: Mapping[Hashable, float] | None) -> np.ndarray:
    """One positive weight per group (1 for groups ``given`` does not name)."""
    given = dict(given or {})
    unknown = [k for k in given if k not in set(names)]
    if unknown:
        raise ValueError(f"group_weights names groups the data does not have: {unknown}; groups: {names}")
    weights = np.array([float(given.get(k, 1.0)) for k in names], dtype=np.float64)
    if not np.all(np.isfinite(weights)) or np.any(weights <= 0):
        raise ValueError(
            f"group weights must be finite and > 0, got {dict(zip(names, weights.tolist(), strict=True))}"
        )
    return weights


def weighted_sample_indices(groups: list[np.ndarray], w: np.ndarray, n: int, seed: int = 0) -> np.ndarray:
    """Sorted indices of at most ``n`` members drawn without replacement, each group's share
    proportional to its weight ``w`` (the sampler's Sainte-Laguë seats; a group that has fewer members
    than its share gives the rest to the others); seeded. A mix's closed-form fit sample."""
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    sizes = np.array([len(g) for g in groups], dtype=np.int64)
    quota = np.zeros(len(groups), dtype=np.int64)
    left = min(n, int(sizes.sum()))
    while left > 0:
        open_ = np.flatnonzero(quota < sizes)
        add = np.minimum(seats(left, w[open_]), sizes[open_] - quota[open_])
        quota[open_] += add
        left -= int(add.sum())
    rng = np.random.default_rng(seed)
    chosen = [rng.choice(g, int(q), replace=False) for g, q in zip(groups, quota, strict=True) if q]
    return np.sort(np.concatenate(chosen)) if chosen else np.zeros(0, dtype=np.int64)


def group_members(groups: np.ndarray, n_groups: int) -> list[np.ndarray]:
    """Per group, the indices of its pairs in increasing order."""
    order = np.argsort(groups, kind="stable")
    counts = np.bincount(groups, minlength=n_groups)
    return [part.astype(np.int64, copy=False) for part in np.split(order, np.cumsum(counts)[:-1])]


def stratified_sample(codes: np.ndarray, n_groups: int, max_pairs: int, seed: int) -> np.ndarray:
    """Sorted indices of a seeded random subset of at most ``max_pairs``, stratified by the group
    ``codes`` (each group keeps a share proportional to its size, largest remainder, so the shares sum
    to exactly ``max_pairs``): the one stratified draw of the dev split, ``--max-pairs`` and the
    closed-form fit sample."""
    n = len(codes)
    if n <= max_pairs:
        return np.arange(n, dtype=np.int64)
    members = group_members(codes, n_groups)
    sizes = np.array([len(m) for m in members])
    exact = sizes * max_pairs / n
    quota = exact.astype(np.int64)
    leftover = max_pairs - int(quota.sum())
    for k in sorted(range(n_groups), key=lambda k: (-(exact[k] - quota[k]), k))[:leftover]:
        quota[k] += 1
    rng = random.Random(seed)
    chosen = [m[rng.sample(range(len(m)), int(q))] for m, q in zip(members, quota, strict=True)]
    return np.sort(np.concatenate(chosen)) if chosen else np.zeros(0, dtype=np.int64)
