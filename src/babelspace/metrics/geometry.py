"""The geometry of an embedding space: how spread, how anisotropic, how hub-ridden, how split by language.

Measures on arrays (one call per language, plus one across languages). Vectors are L2-normalised
first (cosine geometry, as retrieval sees it).

Two kinds of collapse, each seen by one measure and invisible to the other:

- **total variance** (complete collapse: every vector pointing one way, a narrow cone): the summed
  variance of the components of the normalised vectors, ``Σ_j Var(x_j) = 1 − ||mean||²`` for unit
  vectors (population variance). 1 − 1/n for n orthogonal vectors, about 1 for an isotropic cloud,
  0 when every vector points the same way. It cannot see dimensional collapse: vectors spread
  evenly over a 4-dimensional subspace have a total variance near 1. With it the **per-dimension
  standard deviation** (its minimum and median over the d components). This is the "basic measure
  of the variance across components" by which the MEXMA authors (Janeiro et al. 2024, arXiv
  2409.12737, §3 "KoLeo loss", and their OpenReview response) say a non-contrastive alignment
  collapses, and why they add KoLeo.
- **spectrum rank** (dimensional collapse: how many directions carry the variance): the eigenvalues
  of the covariance, the explained-variance curve (cumulative share of the top components) and the
  effective rank ``exp(H(p))`` with ``p`` the eigenvalues normalised to sum 1 (Roy & Vetterli 2007):
  ``d`` for an isotropic cloud in ``d`` dimensions, 1 for points on a line; the standard measure of
  dimensional collapse (Jing et al. 2022, arXiv 2110.09348). It is scale-invariant, so it cannot see
  complete collapse: a cloud shrunk into a narrow cone keeps its spectrum rank.
- **anisotropy**: the mean cosine over all pairs of distinct vectors (Ethayarajh 2019). For unit
  vectors it is a function of the total variance, ``(n(1 − TV) − 1)/(n − 1)``, so it is reported as
  derived from it (:func:`anisotropy_from_total_variance`), not as a second measurement: "total
  variance falls and anisotropy rises" is one finding.
- **hubness**: the skewness of the k-occurrence distribution (how often each vector is among the k
  nearest cosine neighbours of the others; Radovanović et al. 2010), k = 10 by default. Large positive
  skew means a few hubs are everyone's neighbour, which hurts retrieval. **Cross-lingual hubness**
  is the same skew for xx→en retrieval: how often each English vector is among the k nearest
  English neighbours of the language's sentences (the hubs that steal xx→en matches).
- **language share**: between-language variance of the per-language mean vectors over the total
  variance, ``Σ_l n_l ||m_l − m||² / Σ_i ||x_i − m||²`` — the share of the space's spread that only
  says which language a sentence is in (the language-bias view of Reimers & Gurevych 2020, arXiv
  2004.09813, Fig. 2). 0 when the languages overlap, near 1 when they sit in separate clusters.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from babelspace.retrieval.knn import knn_search, l2_normalize

__all__ = [
    "GeometryResult",
    "anisotropy",
    "anisotropy_from_total_variance",
    "cross_k_occurrence",
    "dimension_std",
    "effective_rank",
    "geometry",
    "hubness_skew",
    "k_occurrence",
    "language_share",
    "skewness",
    "total_variance",
    "variance_spectrum",
]

logger = logging.getLogger(__name__)

#: Points of the explained-variance curve kept in the JSON report (component counts).
CURVE_POINTS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)


def variance_spectrum(x: np.ndarray) -> np.ndarray:
    """Eigenvalues of the covariance of the rows of ``x``, largest first (float64, >= 0)."""
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2 or len(x) < 2:
        raise ValueError(f"need [n >= 2, d] vectors, got shape {x.shape}")
    centred = x - x.mean(0)
    sv = np.linalg.svd(centred, compute_uv=False)
    eig = sv**2 / (len(x) - 1)
    return np.clip(np.sort(eig)[::-1], 0.0, None)


def effective_rank(eigenvalues: np.ndarray) -> float:
    """``exp`` of the entropy of the eigenvalues normalised to sum 1 (1 ... number of eigenvalues)."""
    eig = np.clip(np.asarray(eigenvalues, dtype=np.float64), 0.0, None)
    total = eig.sum()
    if total <= 0:
        return 0.0
    p = eig[eig > 0] / total
    return float(np.exp(-(p * np.log(p)).sum()))


def explained_variance(eigenvalues: np.ndarray) -> np.ndarray:
    """Cumulative share of the variance in the top 1, 2, ... components."""
    eig = np.asarray(eigenvalues, dtype=np.float64)
    total = eig.sum()
    return np.cumsum(eig) / total if total > 0 else np.zeros_like(eig)


def total_variance(x: np.ndarray) -> float:
    """Summed (population) variance of the components of the L2-normalised rows: ``1 − ||mean||²``.
    Near 0 when every row points the same way (collapse), whatever the spectrum's shape."""
    v = l2_normalize(np.asarray(x, dtype=np.float32)).astype(np.float64)
    if len(v) < 2:
        raise ValueError("total variance needs at least 2 vectors")
    mean = v.mean(0)
    return float(max(0.0, 1.0 - mean @ mean))


def dimension_std(x: np.ndarray) -> tuple[float, float]:
    """(minimum, median) over the components of the standard deviation of the L2-normalised rows."""
    v = l2_normalize(np.asarray(x, dtype=np.float32)).astype(np.float64)
    if len(v) < 2:
        raise ValueError("per-dimension standard deviation needs at least 2 vectors")
    std = v.std(0)
    return float(std.min()), float(np.median(std))


def anisotropy_from_total_variance(total_var: float, n: int) -> float:
    """The mean cosine over the pairs of distinct rows of ``n`` unit vectors whose total variance is
    ``total_var``: ``||Σ v||² = n²(1 − TV)``, so the mean off-diagonal cosine is
    ``(n²(1 − TV) − n)/(n(n − 1)) = (n(1 − TV) − 1)/(n − 1)``."""
    if n < 2:
        raise ValueError("anisotropy needs at least 2 vectors")
    return float((n * (1.0 - total_var) - 1.0) / (n - 1))


def anisotropy(x: np.ndarray) -> float:
    """Mean cosine over all pairs of distinct rows of ``x`` (derived from the total variance)."""
    v = np.asarray(x)
    if len(v) < 2:
        raise ValueError("anisotropy needs at least 2 vectors")
    return anisotropy_from_total_variance(total_variance(v), len(v))


def k_occurrence(x: np.ndarray, k: int = 10) -> np.ndarray:
    """How often each row is among the ``k`` nearest cosine neighbours of the other rows."""
    v = l2_normalize(np.asarray(x, dtype=np.float32))
    n = len(v)
    if n <= k:
        raise ValueError(f"hubness with k={k} needs more than {k} vectors, got {n}")
    _, idx = knn_search(v, v, k + 1, backend="numpy")
    counts = np.zeros(n, dtype=np.int64)
    for i, row in enumerate(idx):
        others = [j for j in row.tolist() if j != i][:k]
        np.add.at(counts, others, 1)
    return counts


def cross_k_occurrence(queries: np.ndarray, database: np.ndarray, k: int = 10) -> np.ndarray:
    """How often each ``database`` row is among the ``k`` nearest cosine neighbours of the ``queries``
    (xx→en retrieval: queries in language xx, the English sentences as the database)."""
    q = l2_normalize(np.asarray(queries, dtype=np.float32))
    db = l2_normalize(np.asarray(database, dtype=np.float32))
    if len(db) <= k:
        raise ValueError(
            f"cross-lingual hubness with k={k} needs more than {k} database vectors, got {len(db)}"
        )
    _, idx = knn_search(q, db, k, backend="numpy")
    return np.bincount(idx.reshape(-1), minlength=len(db)).astype(np.int64)


def skewness(values: np.ndarray) -> float:
    """Skewness of ``values`` (0 when they are all equal)."""
    v = np.asarray(values, dtype=np.float64)
    sd = v.std()
    return 0.0 if sd == 0 else float(np.mean((v - v.mean()) ** 3) / sd**3)


def hubness_skew(x: np.ndarray, k: int = 10) -> float:
    """Skewness of the k-occurrence distribution (0 when every row is equally often a neighbour)."""
    return skewness(k_occurrence(x, k))


def language_share(by_language: Mapping[str, np.ndarray]) -> float:
    """Between-language variance of the per-language means / total variance (normalised vectors)."""
    groups = [l2_normalize(np.asarray(v, dtype=np.float32)).astype(np.float64) for v in by_language.values()]
    if len(groups) < 2:
        raise ValueError("language share needs at least 2 languages")
    allv = np.concatenate(groups)
    mean = allv.mean(0)
    total = float(((allv - mean) ** 2).sum())
    between = float(sum(len(g) * ((g.mean(0) - mean) ** 2).sum() for g in groups))
    return between / total if total > 0 else 0.0


@dataclass
class GeometryResult:
    """Per-language figures (``per_language[lang]``) and the across-language ones."""

    per_language: dict[str, dict[str, Any]] = field(default_factory=dict)
    language_share: float | None = None
    pooled: dict[str, Any] = field(default_factory=dict)
    spectra: dict[str, list[float]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _figures(x: np.ndarray, k: int) -> tuple[dict[str, Any], np.ndarray]:
    v = l2_normalize(np.asarray(x, dtype=np.float32))
    eig = variance_spectrum(v)
    curve = explained_variance(eig)
    std_min, std_median = dimension_std(v)
    tv = total_variance(v)
    row = {
        "n": len(v),
        "total_variance": tv,
        "dim_std_min": std_min,
        "dim_std_median": std_median,
        "spectrum_rank": effective_rank(eig),
        "anisotropy": anisotropy_from_total_variance(tv, len(v)),  # derived, not a second measure
        "hubness_skew": hubness_skew(v, k) if len(v) > k else None,
        "explained_variance": {str(c): float(curve[c - 1]) for c in CURVE_POINTS if c <= len(curve)},
    }
    return row, curve


def geometry(
    by_language: Mapping[str, np.ndarray], k: int = 10, english: str | None = "en"
) -> GeometryResult:
    """All measures for ``{language: [n, d] vectors}`` (one row per language, and pooled). When
    ``english`` is one of the languages, every other language's row also gets its cross-lingual
    hubness (``cross_hubness_skew``: skew of the k-occurrence of xx→``english`` retrieval)."""
    if not by_language:
        raise ValueError("no vectors given")
    res = GeometryResult()
    pivot = by_language.get(english) if english is not None else None
    for lang, x in by_language.items():
        res.per_language[lang], curve = _figures(x, k)
        res.spectra[lang] = curve.tolist()
        if pivot is not None and lang != english and len(pivot) > k:
            res.per_language[lang]["cross_hubness_skew"] = skewness(cross_k_occurrence(x, pivot, k))
    if len(by_language) >= 2:
        res.language_share = language_share(by_language)
        res.pooled, _ = _figures(np.concatenate(list(by_language.values())), k)
    return res
