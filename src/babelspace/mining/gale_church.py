"""The length-based baseline of ``babelspace align --method gale-church`` (Gale & Church 1993).

A block of source sentences of ``l1`` characters and target sentences of ``l2`` characters costs

    -log P(type) - log P(|delta|),   delta = (c * l1 - l2) / sqrt(s2 * (l1 + l2 / c) / 2),
    P(|delta|) = 2 (1 - Phi(|delta|)),

with the paper's priors (1-1 0.89, 1-0 / 0-1 0.0099, 2-1 / 1-2 0.089, 2-2 0.011) and variance
``s2 = 6.8``. The paper takes ``c = 1`` (English, French and German have about as many characters per
sentence); here ``c`` is the document pair's own ratio of target to source characters, so that
languages such as Chinese (far fewer characters than English) get a fair baseline. Documents with
``n0 * n1 > max_full_dp ** 2`` are searched in a corridor around the diagonal, a tenth of the longer
document wide (at least ``band``) on either side.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import log_ndtr

from babelspace.mining.align_dp import AlignConfig, Band, Block, BlockCost, dp_align, staircase

__all__ = ["PRIORS", "VARIANCE", "gale_church_alignment", "length_scores"]

#: Prior probability of each block type (Gale & Church 1993, Table 5).
PRIORS: dict[tuple[int, int], float] = {
    (1, 1): 0.89,
    (1, 0): 0.0099,
    (0, 1): 0.0099,
    (2, 1): 0.089,
    (1, 2): 0.089,
    (2, 2): 0.011,
}
#: Variance of the target length per source character (Gale & Church 1993, §4).
VARIANCE = 6.8


def _length_cost(l1: float, l2: np.ndarray, ratio: float) -> np.ndarray:
    """``-log P(|delta|)`` of a source length ``l1`` against each target length in ``l2``."""
    mean = (l1 + l2 / ratio) / 2.0
    safe = np.where(mean > 0, mean, 1.0)
    delta = np.abs(ratio * l1 - l2) / np.sqrt(VARIANCE * safe)
    return np.where(mean > 0, -(math.log(2.0) + log_ndtr(-delta)), 0.0)


def _cost(lens0: np.ndarray, lens1: np.ndarray, ratio: float) -> BlockCost:
    cum0 = np.concatenate([[0.0], np.cumsum(lens0, dtype=np.float64)])
    cum1 = np.concatenate([[0.0], np.cumsum(lens1, dtype=np.float64)])

    def cost(a: int, b: int, i: int, js: np.ndarray) -> np.ndarray:
        l1 = cum0[i] - cum0[i - a]
        l2 = cum1[js] - cum1[js - b]
        return _length_cost(l1, l2, ratio) - math.log(PRIORS[(a, b)])

    return cost


def gale_church_alignment(
    lens0: list[int] | np.ndarray, lens1: list[int] | np.ndarray, cfg: AlignConfig
) -> tuple[list[Block], list[float]]:
    """The blocks aligning two documents from their sentence lengths (characters), and each block's
    cost. Block types: those of :data:`PRIORS` with ``a + b <= cfg.max_size``."""
    lens0, lens1 = np.asarray(lens0, dtype=np.float64), np.asarray(lens1, dtype=np.float64)
    n0, n1 = len(lens0), len(lens1)
    total0, total1 = float(lens0.sum()), float(lens1.sum())
    ratio = total1 / total0 if total0 > 0 and total1 > 0 else 1.0
    types = [t for t in PRIORS if t[0] + t[1] <= cfg.max_size]
    band = None
    if n0 * n1 > cfg.max_full_dp**2:
        diagonal = [(0, 0)]
        staircase(diagonal, n0, n1)
        band = Band.around(diagonal, n0, n1, max(cfg.band, max(n0, n1) // 10))
    return dp_align(n0, n1, types, _cost(lens0, lens1, ratio), band)


def length_scores(blocks: list[Block], costs: list[float]) -> list[float]:
    """``P(|delta|)`` of each block with both sides: 1 when the lengths agree exactly, towards 0 as
    they disagree (the score ``babelspace align --method gale-church`` writes)."""
    return [
        math.exp(-(c + math.log(PRIORS[(len(s), len(t))])))
        for (s, t), c in zip(blocks, costs, strict=True)
        if s and t
    ]
