"""Keeping a batch free of repeats: a pair recycled into the batch that already holds it, or (with
``distinct_texts``) two pairs sharing a text, is swapped with a pair of the same group in the
nearest batch that can take it, so per-group counts stay exact (:mod:`babelspace.data.sampling`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence

import numpy as np

__all__ = ["separate_repeats", "separate_shared_texts"]


def separate_repeats(parts: list[np.ndarray]) -> None:
    """Swap repeated indices out of a batch's part with the nearest batch that can take them.

    A recycled group repeats its indices: at the boundary of two permutations, and often when a
    window of a small group is sorted by length (the copies of one pair are then adjacent). A pair
    twice in one batch would be its own in-batch negative, so each copy is exchanged (in place)
    with an index of a nearby batch (similar length when bucketed) that neither batch holds yet.
    Impossible only when a group has fewer pairs than its share of a batch; then copies stay.
    """
    n = len(parts)
    for b, part in enumerate(parts):
        if len(np.unique(part)) == len(part):
            continue
        held = Counter(part.tolist())
        for pos in range(len(part)):
            x = int(part[pos])
            if held[x] < 2:
                continue
            for nb in _neighbours(b, n):
                other = parts[nb]
                if x in other:
                    continue
                candidates = [q for q in range(len(other)) if int(other[q]) not in held]
                if candidates:
                    q = candidates[0]
                    y = int(other[q])
                    part[pos], other[q] = y, x
                    held[x] -= 1
                    held[y] += 1
                    break


def _neighbours(b: int, n: int, limit: int | None = None) -> Iterator[int]:
    """b+1, b-1, b+2, b-2, ... within 0..n-1 (at most ``limit`` steps away)."""
    for d in range(1, n if limit is None else min(n, limit + 1)):
        if b + d < n:
            yield b + d
        if b - d >= 0:
            yield b - d


#: How far (in batches, before the window shuffle) a clashing pair may travel to find a batch.
_MAX_SWAP_DISTANCE = 200


def separate_shared_texts(
    group_parts: list[list[np.ndarray]], texts: Sequence[tuple[int, ...]], lengths: np.ndarray
) -> int:
    """Swap pairs so that no two pairs of a batch share a text; returns the clashes left.

    ``group_parts[g][b]`` holds group g's indices in batch b (changed in place); ``texts[i]`` the
    text ids of pair i. A clashing pair is exchanged with a pair of the same group (so the counts
    per group stay) in the nearest batch where neither pair clashes, the closest in ``lengths``
    among the candidates at that distance (keeps the bucketing).
    """
    n_batches = len(group_parts[0]) if group_parts else 0
    held = [Counter() for _ in range(n_batches)]
    for parts in group_parts:
        for b, part in enumerate(parts):
            for i in part.tolist():
                held[b].update(texts[i])
    left = 0
    for b in range(n_batches):
        for parts in group_parts:
            part = parts[b]
            for pos in range(len(part)):
                mine = texts[int(part[pos])]
                if all(held[b][t] == 1 for t in mine):
                    continue
                if not _swap_into_neighbour(parts, held, texts, lengths, b, pos):
                    left += 1
    return left


def _swap_into_neighbour(
    parts: list[np.ndarray],
    held: list[Counter],
    texts: Sequence[tuple[int, ...]],
    lengths: np.ndarray,
    b: int,
    pos: int,
) -> bool:
    """Exchange ``parts[b][pos]`` with an index of the nearest batch that both sides can take."""
    x = int(parts[b][pos])
    tx = texts[x]
    n = len(parts)
    for d in range(1, min(n, _MAX_SWAP_DISTANCE + 1)):
        best: tuple[int, int, int] | None = None  # (length gap, batch, position)
        for nb in (b + d, b - d):
            if not 0 <= nb < n:
                continue
            for q, y in enumerate(parts[nb].tolist()):
                ty = texts[y]
                if any(held[b][t] - (t in tx) > 0 for t in ty):
                    continue
                if any(held[nb][t] - (t in ty) > 0 for t in tx):
                    continue
                gap = abs(int(lengths[y]) - int(lengths[x]))
                if best is None or gap < best[0]:
                    best = (gap, nb, q)
        if best is not None:
            _, nb, q = best
            y = int(parts[nb][q])
            parts[b][pos], parts[nb][q] = y, x
            held[b].subtract(tx)
            held[b].update(texts[y])
            held[nb].subtract(texts[y])
            held[nb].update(tx)
            return True
    return False
