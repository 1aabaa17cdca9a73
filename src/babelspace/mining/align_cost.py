"""Vecalign's block cost and its coarse-to-fine search (Thompson & Koehn 2019, *Vecalign*, §3).

Each side's *overlap vectors* ``ov[k - 1, i - 1]`` embed the concatenation of the ``k`` sentences that
end at sentence ``i`` (``k = 1 .. max_size - 1``; rows with ``i < k`` are unused). A block of ``a``
source and ``b`` target sentences ending at ``(i, j)`` costs

    c(x, y) = 2 (1 - cos(x, y)) / (norm(x) + norm(y)) * a * b,
    norm(x) = 1 - mean_s cos(x, y_s),

with ``x = ov0[a-1, i-1]``, ``y = ov1[b-1, j-1]`` and ``y_s`` random overlap vectors of the other
document (``norm_samples`` of them, drawn evenly over the overlap sizes): a block is cheap when its two
sides are closer than either is to the other document in general, which discounts "hub" sentences
that are close to everything. The ``a * b`` factor makes a merge pay for the sentences it swallows.
A 1-0 or 0-1 block costs the ``deletion_percentile`` quantile of the costs of random 1-1 pairs.

Copies: a cosine is taken as at most 1 (rounding makes a copy's a hair above 1, and a negative cost
times ``a * b`` made a merge of copies *cheaper* than its 1-1 blocks), and a block of more than two
sentences costs :data:`MERGE_PENALTY` more per extra sentence, so that a merge of copies, which costs
0 as their 1-1 blocks do, never wins a tie: lines left untranslated (a URL, an ISBN) and a document
aligned with itself stay 1-1.

Documents with ``n0 * n1 > max_full_dp ** 2`` are first aligned 1-1 at half resolution (neighbouring
sentence vectors summed, the mean removed, renormalised; recursively, until the size fits), and the
full search then runs in a corridor of ``band`` columns around that path, upsampled.
"""

from __future__ import annotations

import numpy as np

from babelspace.mining.align_dp import (
    AlignConfig,
    Band,
    Block,
    BlockCost,
    alignment_types,
    dp_align,
    path_through,
    staircase,
)

__all__ = ["block_scores", "embedding_alignment", "overlap_texts", "overlap_vectors"]

_ONE_TO_ONE = [(1, 0), (0, 1), (1, 1)]
#: Added to a block's cost per sentence beyond two (``(a + b - 2) * MERGE_PENALTY``): breaks the tie of
#: a merge of copies with their 1-1 blocks, far below any real cost difference (costs are about 0.1-2).
MERGE_PENALTY = 1e-4


def overlap_texts(lines: list[str], max_overlap: int, joiner: str = " ") -> list[list[str]]:
    """``texts[k - 1][i - k]``: the ``k`` sentences ending at sentence ``i`` joined (``i = k .. n``)."""
    return [
        [joiner.join(lines[i - k : i]) for i in range(k, len(lines) + 1)] for k in range(1, max_overlap + 1)
    ]


def overlap_vectors(texts: list[list[str]], n: int, row_of: dict[str, int], emb: np.ndarray) -> np.ndarray:
    """``(max_overlap, n, dim)`` overlap vectors from the embeddings ``emb[row_of[text]]`` (zeros where
    fewer than ``k`` sentences end at ``i``)."""
    out = np.zeros((len(texts), n, emb.shape[1]), dtype=np.float32)
    for k, layer in enumerate(texts, 1):
        if layer:
            out[k - 1, k - 1 :] = emb[[row_of[t] for t in layer]]
    return out


def _norms(own: np.ndarray, other: np.ndarray, samples: int, rng: np.random.Generator) -> np.ndarray:
    """``1 - mean cos`` of every overlap vector of ``own`` with ``samples`` random vectors of ``other``."""
    sizes, n_other = other.shape[0], other.shape[1]
    usable = [k for k in range(sizes) if n_other > k]
    per = -(-samples // len(usable))
    picks = [other[k, rng.integers(k, n_other, size=per)] for k in usable]
    sample = np.concatenate(picks)
    return 1.0 - own @ sample.mean(axis=0)


def _pair_costs(
    v0: np.ndarray, v1: np.ndarray, nm0: np.ndarray, nm1: np.ndarray, samples: int, rng: np.random.Generator
) -> np.ndarray:
    """Normalised 1-1 costs of random sentence pairs (all pairs when there are fewer than ``samples``)."""
    n0, n1 = len(v0), len(v1)
    if n0 * n1 <= samples:
        xs, ys = np.divmod(np.arange(n0 * n1), n1)
    else:
        xs, ys = rng.integers(0, n0, size=samples), rng.integers(0, n1, size=samples)
    dots = np.minimum(np.einsum("ij,ij->i", v0[xs], v1[ys]), 1.0)
    return 2.0 * (1.0 - dots) / (nm0[xs] + nm1[ys] + 1e-6)


def _cost(ov0: np.ndarray, ov1: np.ndarray, nm0: np.ndarray, nm1: np.ndarray, deletion: float) -> BlockCost:
    def cost(a: int, b: int, i: int, js: np.ndarray) -> np.ndarray:
        if a == 0 or b == 0:
            return np.full(len(js), deletion)
        ys = js - 1
        dots = np.minimum(ov1[b - 1, ys] @ ov0[a - 1, i - 1], 1.0)
        scaled = 2.0 * (1.0 - dots) / (nm0[a - 1, i - 1] + nm1[b - 1, ys] + 1e-6) * (a * b)
        return scaled + (a + b - 2) * MERGE_PENALTY

    return cost


def _setup(ov0: np.ndarray, ov1: np.ndarray, cfg: AlignConfig, rng: np.random.Generator) -> BlockCost:
    """The block cost of two documents' overlap vectors: their norms and deletion cost sampled."""
    nm0 = _norms(ov0, ov1, cfg.norm_samples, rng)
    nm1 = _norms(ov1, ov0, cfg.norm_samples, rng)
    pairs = _pair_costs(ov0[0], ov1[0], nm0[0], nm1[0], cfg.cost_samples, rng)
    deletion = float(np.quantile(pairs, cfg.deletion_percentile))
    return _cost(ov0, ov1, nm0, nm1, deletion)


def _downsample(v: np.ndarray) -> np.ndarray:
    """Half resolution: neighbouring vectors summed (a last odd one dropped), the mean removed, unit
    length."""
    m = len(v) // 2
    half = v[0 : 2 * m : 2] + v[1 : 2 * m : 2]
    half = half - half.mean(axis=0)
    return half / (np.linalg.norm(half, axis=1, keepdims=True) + 1e-5)


def _upsample(path: list[tuple[int, int]], n0: int, n1: int) -> list[tuple[int, int]]:
    """A half-resolution path at full resolution, ending at ``(n0, n1)``."""
    fine = [(0, 0)]
    for x, y in path[1:]:
        staircase(fine, 2 * x, 2 * y)
    staircase(fine, n0, n1)
    return fine


def _band(v0: np.ndarray, v1: np.ndarray, cfg: AlignConfig, rng: np.random.Generator) -> Band:
    """The exact search's band when the documents are small enough, else a corridor around the path
    found at half resolution."""
    n0, n1 = len(v0), len(v1)
    if n0 * n1 <= cfg.max_full_dp**2 or min(n0, n1) < 8:
        return Band.full(n0, n1)
    coarse = _one_to_one_path(_downsample(v0), _downsample(v1), cfg, rng)
    return Band.around(_upsample(coarse, n0, n1), n0, n1, cfg.band)


def _one_to_one_path(
    v0: np.ndarray, v1: np.ndarray, cfg: AlignConfig, rng: np.random.Generator
) -> list[tuple[int, int]]:
    """The path of the best 1-1 / 1-0 / 0-1 alignment of single-sentence vectors (recursively banded)."""
    n0, n1 = len(v0), len(v1)
    cost = _setup(v0[None], v1[None], cfg, rng)
    blocks, _ = dp_align(n0, n1, _ONE_TO_ONE, cost, _band(v0, v1, cfg, rng))
    return path_through(blocks, n0, n1)


def embedding_alignment(
    ov0: np.ndarray, ov1: np.ndarray, cfg: AlignConfig
) -> tuple[list[Block], list[float]]:
    """The blocks aligning two documents given their overlap vectors (``(max_size - 1, n, dim)``, unit
    length), and each block's cost. Deterministic for a given ``cfg.seed``."""
    rng = np.random.default_rng(cfg.seed)
    n0, n1 = ov0.shape[1], ov1.shape[1]
    cost = _setup(ov0, ov1, cfg, rng)
    band = _band(ov0[0], ov1[0], cfg, rng)
    types = [(a, b) for a, b in alignment_types(cfg.max_size) if a <= ov0.shape[0] and b <= ov1.shape[0]]
    return dp_align(n0, n1, types, cost, band)


def block_scores(blocks: list[Block], costs: list[float]) -> list[float]:
    """``1 - cost / (a * b)`` of each block with both sides (its :data:`MERGE_PENALTY` taken off
    first): 1 for identical vectors, 0 for two sides no closer than each is on average to the other
    document's sentences, negative below that (the score ``babelspace align`` writes; docs/alignment.md
    gives the values correct blocks take)."""
    return [
        1.0 - (c - (len(s) + len(t) - 2) * MERGE_PENALTY) / (len(s) * len(t))
        for (s, t), c in zip(blocks, costs, strict=True)
        if s and t
    ]
