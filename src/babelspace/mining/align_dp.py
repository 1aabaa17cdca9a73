"""Monotone sentence alignment by dynamic programming over a band: the search behind ``babelspace align``.

An alignment of a source document of ``n0`` sentences with a target document of ``n1`` is a sequence of
*blocks* ``(src[i-a:i], tgt[j-b:j])`` that covers both documents in order; ``(a, b)`` is one of the
allowed types: ``1-0`` and ``0-1`` (a sentence without a counterpart) and every ``a-b`` with
``a, b >= 1`` and ``a + b <= max_size`` (``max_size`` 4: 1-1, 1-2, 2-1, 1-3, 2-2, 3-1; Thompson &
Koehn 2019, *Vecalign*, §3). :func:`dp_align` returns the blocks of least total cost for a cost
function of blocks.

Cell ``(i, j)`` means ``i`` source and ``j`` target sentences consumed. Row ``i`` depends on the rows
``i - a`` (``a >= 1``) and, through ``0-1`` blocks, on itself; every row is computed with numpy over
its band of columns, the ``0-1`` recurrence ``C[i, j] = min(base[j], C[i, j-1] + d[j])`` as a prefix
minimum (``C[i, j] = D[j] + min_{k <= j} (base[k] - D[k])``, ``D`` the cumulative ``0-1`` costs).

A :class:`Band` limits row ``i`` to the columns ``lo[i]..hi[i]``: :meth:`Band.full` is the exact
search, :meth:`Band.around` a corridor of ``width`` columns either side of a path, which is how long
documents are aligned (a coarse path first, then the search near it; vecalign's recursive
approximation, §3.2).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from babelspace.config_fields import option
from babelspace.data.apportionment import MAX_SEED
from babelspace.errors import BabelspaceError

__all__ = [
    "ALIGNMENT",
    "AlignConfig",
    "AlignError",
    "Band",
    "Block",
    "BlockCost",
    "alignment_types",
    "block_type",
    "dp_align",
    "path_through",
    "staircase",
]

METHODS = ("embeddings", "gale-church")
#: The group of ``babelspace align --help`` that holds the :class:`AlignConfig` flags.
ALIGNMENT = "alignment"

#: ``cost(a, b, i, js)``: the costs of the blocks ``src[i-a:i] ~ tgt[j-b:j]`` for every column ``j`` of
#: ``js`` (an int array; ``a`` or ``b`` is 0 for a deletion). Only cells with ``i >= a`` and ``j >= b``
#: are asked for.
BlockCost = Callable[[int, int, int, np.ndarray], np.ndarray]

#: One aligned block: the source sentence indices and the target sentence indices (0-based; one side
#: is empty for a 1-0 or 0-1 block).
Block = tuple[tuple[int, ...], tuple[int, ...]]


class AlignError(BabelspaceError):
    """``babelspace align`` cannot run as asked (a bad setting, unpaired documents)."""


@dataclass(frozen=True)
class AlignConfig:
    """How ``babelspace align`` aligns a document pair (defaults: vecalign's, except ``band``).

    ``method``: ``embeddings`` (vecalign's cost: ``1 - cos`` of the embeddings of the concatenated
    sentences, normalised by each side's neighbourhood) or ``gale-church`` (sentence lengths only).
    ``max_size``: the largest ``a + b`` of a block (``a`` and ``b`` up to 2 for gale-church).
    ``deletion_percentile``: a 1-0 / 0-1 block costs this quantile of the costs of random 1-1 pairs.
    ``band``: columns searched either side of the coarse path. ``max_full_dp``: documents with
    ``n0 * n1 <= max_full_dp ** 2`` get the exact search, longer ones the coarse-to-fine one.
    ``norm_samples`` / ``cost_samples``: random sentences behind the normalisation / deletion cost.
    """

    method: Literal["embeddings", "gale-church"] = option(
        "embeddings",
        "embeddings: vecalign's cost (needs --model); gale-church: sentence lengths only (a baseline)",
        ALIGNMENT,
    )
    max_size: int = option(
        4, "largest block: a-b blocks with a + b <= this (4: up to 1-3, 2-2, 3-1)", ALIGNMENT, min=1
    )
    deletion_percentile: float = option(
        0.2,
        "a 1-0 or 0-1 block costs this quantile of the costs of random 1-1 pairs (higher: more deletions)",
        ALIGNMENT,
        parse="fraction",
    )
    band: int = option(8, "sentences searched either side of the coarse path", ALIGNMENT, min=1)
    max_full_dp: int = option(
        300,
        "documents with n_src * n_tgt <= this squared are searched exactly, longer ones coarse to fine",
        ALIGNMENT,
        min=1,
    )
    norm_samples: int = option(
        100, "random sentences of the other document behind each sentence's normalisation", ALIGNMENT, min=1
    )
    cost_samples: int = 20000
    seed: int = option(0, "seed of the random samples (the output is deterministic)", ALIGNMENT)

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise AlignError(f"--method must be one of {', '.join(METHODS)}, not {self.method!r}")
        if self.max_size < 2:
            raise AlignError(f"--max-size must be at least 2 (1-1 blocks), not {self.max_size}")
        if not 0 < self.deletion_percentile < 1:
            raise AlignError(f"--deletion-percentile must be between 0 and 1, not {self.deletion_percentile}")
        for name in ("band", "max_full_dp", "norm_samples", "cost_samples"):
            if getattr(self, name) < 1:
                raise AlignError(f"--{name.replace('_', '-')} must be at least 1, not {getattr(self, name)}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or not 0 <= self.seed <= MAX_SEED:
            raise AlignError(
                f"--seed must be between 0 and {MAX_SEED} (numpy's seed range), not {self.seed!r}"
            )


def alignment_types(max_size: int, max_side: int | None = None) -> list[tuple[int, int]]:
    """``(1, 0)``, ``(0, 1)``, then every ``(a, b)`` with ``a, b >= 1``, ``a + b <= max_size`` and (when
    given) ``a, b <= max_side``."""
    side = max_side or max_size
    pairs = [(a, b) for a in range(1, side + 1) for b in range(1, side + 1) if a + b <= max_size]
    return [(1, 0), (0, 1), *pairs]


def block_type(block: Block) -> str:
    """``"2-1"`` for a block of two source sentences and one target sentence."""
    return f"{len(block[0])}-{len(block[1])}"


@dataclass(frozen=True)
class Band:
    """The columns ``lo[i]..hi[i]`` (inclusive) the search visits in row ``i``."""

    lo: np.ndarray
    hi: np.ndarray

    @classmethod
    def full(cls, n0: int, n1: int) -> Band:
        return cls(np.zeros(n0 + 1, dtype=np.int64), np.full(n0 + 1, n1, dtype=np.int64))

    @classmethod
    def around(cls, path: Sequence[tuple[int, int]], n0: int, n1: int, width: int) -> Band:
        """``width`` columns either side of ``path`` (a staircase from ``(0, 0)`` to ``(n0, n1)`` that
        visits every row)."""
        lo = np.full(n0 + 1, n1, dtype=np.int64)
        hi = np.zeros(n0 + 1, dtype=np.int64)
        xs = np.array([p[0] for p in path], dtype=np.int64)
        ys = np.array([p[1] for p in path], dtype=np.int64)
        np.minimum.at(lo, xs, ys)
        np.maximum.at(hi, xs, ys)
        lo, hi = np.maximum(lo - width, 0), np.minimum(hi + width, n1)
        lo[0], hi[-1] = 0, n1
        return cls(lo, hi)

    def cells(self) -> int:
        return int((self.hi - self.lo + 1).sum())


def staircase(path: list[tuple[int, int]], x: int, y: int) -> None:
    """Extend ``path`` from its last point to ``(x, y)`` by unit steps close to the straight line."""
    x0, y0 = path[-1]
    dx, dy = x - x0, y - y0
    cx, cy = x0, y0
    while (cx, cy) != (x, y):
        # step along x while the x-progress is behind the y-progress (cross-multiplied, exact)
        if cy == y or (cx < x and (cx - x0 + 1) * dy <= (cy - y0 + 1) * dx):
            cx += 1
        else:
            cy += 1
        path.append((cx, cy))


def path_through(blocks: Sequence[Block], n0: int, n1: int) -> list[tuple[int, int]]:
    """A staircase from ``(0, 0)`` to ``(n0, n1)`` along ``blocks``: straight through each block with
    both sides, and straight through each run of deletions (so that the order the search happened to
    give 1-0 and 0-1 blocks does not bend the corridor; as vecalign)."""
    path = [(0, 0)]
    x = y = 0
    for src, tgt in blocks:
        if src and tgt and (x, y) != path[-1]:
            staircase(path, x, y)  # the pending deletions
        x, y = x + len(src), y + len(tgt)
        if src and tgt:
            staircase(path, x, y)
    staircase(path, n0, n1)
    return path


def _gather(rows: list[np.ndarray], band: Band, r: int, cols: np.ndarray) -> np.ndarray:
    """Row ``r``'s costs at ``cols`` (inf outside its band)."""
    out = np.full(len(cols), np.inf)
    lo, hi = band.lo[r], band.hi[r]
    inside = (cols >= lo) & (cols <= hi)
    out[inside] = rows[r][cols[inside] - lo]
    return out


def _insertions(base: np.ndarray, bp: np.ndarray, steps: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Row costs after 0-1 blocks: ``C[t] = min(base[t], C[t-1] + steps[t])`` (``steps[0]`` unused)."""
    cum = np.concatenate([[0.0], np.cumsum(steps[1:])])
    v = base - cum
    best = np.minimum.accumulate(v)
    idx = np.arange(len(v))
    where = np.maximum.accumulate(np.where(v == best, idx, 0))
    came = where < idx  # the best path enters this cell from its left neighbour
    out, bp = base.copy(), bp.copy()
    out[came] = best[came] + cum[came]
    bp[came] = k
    return out, bp


def _check_band(band: Band, n0: int, n1: int) -> None:
    if len(band.lo) != n0 + 1 or band.lo[0] != 0 or band.hi[n0] != n1 or (band.lo > band.hi).any():
        raise ValueError("the band must start at (0, 0), end at (n0, n1) and be non-empty in every row")


def _row(
    i: int,
    js: np.ndarray,
    rows: list[np.ndarray],
    band: Band,
    types: Sequence[tuple[int, int]],
    cost: BlockCost,
) -> tuple[np.ndarray, np.ndarray]:
    """The least costs of row ``i`` at the columns ``js`` and the block type each came from."""
    base = np.full(len(js), np.inf)
    bp = np.full(len(js), -1, dtype=np.int16)
    if i == 0:
        base[js == 0] = 0.0
    for k, (a, b) in enumerate(types):
        if a == 0 or a > i:
            continue
        prev = _gather(rows, band, i - a, js - b)
        ok = np.isfinite(prev) & (js >= b)
        if not ok.any():
            continue
        total = np.full(len(js), np.inf)
        total[ok] = prev[ok] + cost(a, b, i, js[ok])
        better = total < base
        base[better] = total[better]
        bp[better] = k
    if (0, 1) in types and len(js) > 1:
        steps = np.zeros(len(js))
        steps[1:] = cost(0, 1, i, js[1:])
        base, bp = _insertions(base, bp, steps, types.index((0, 1)))
    return base, bp


def dp_align(
    n0: int, n1: int, types: Sequence[tuple[int, int]], cost: BlockCost, band: Band | None = None
) -> tuple[list[Block], list[float]]:
    """The blocks of least total ``cost`` aligning ``n0`` source with ``n1`` target sentences, in
    document order, and each block's cost. ``types`` must include ``(1, 0)`` and ``(0, 1)`` unless
    the band guarantees a path without them."""
    types = list(types)
    band = band or Band.full(n0, n1)
    _check_band(band, n0, n1)
    rows: list[np.ndarray] = []
    pointers: list[np.ndarray] = []
    for i in range(n0 + 1):
        js = np.arange(band.lo[i], band.hi[i] + 1)
        c, bp = _row(i, js, rows, band, types, cost)
        rows.append(c)
        pointers.append(bp)
    if not np.isfinite(rows[n0][n1 - band.lo[n0]]):
        raise ValueError("no alignment inside the band (widen it or allow 1-0 and 0-1 blocks)")
    return _traceback(rows, pointers, band, types, n0, n1)


def _traceback(
    rows: list[np.ndarray],
    pointers: list[np.ndarray],
    band: Band,
    types: Sequence[tuple[int, int]],
    n0: int,
    n1: int,
) -> tuple[list[Block], list[float]]:
    blocks: list[Block] = []
    costs: list[float] = []
    i, j = n0, n1
    while (i, j) != (0, 0):
        k = int(pointers[i][j - band.lo[i]])
        if k < 0:
            raise ValueError(f"cell ({i}, {j}) of the alignment search was never reached")
        a, b = types[k]
        here = rows[i][j - band.lo[i]]
        there = rows[i - a][j - b - band.lo[i - a]]
        blocks.append((tuple(range(i - a, i)), tuple(range(j - b, j))))
        costs.append(float(here - there))
        i, j = i - a, j - b
    return blocks[::-1], costs[::-1]
