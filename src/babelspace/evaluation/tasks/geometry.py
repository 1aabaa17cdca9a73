"""Geometry task: per language the total variance of the normalised vectors (complete collapse: a
narrow cone), the per-dimension standard deviation, the spectrum rank (effective rank of the variance
spectrum: dimensional collapse, blind to a cone), the anisotropy derived from the total variance
(``(n(1 − TV) − 1)/(n − 1)``, not a second measurement), hubness and cross-lingual (xx→en) hubness,
and the share of the variance that separates languages (array functions in
:mod:`babelspace.metrics.geometry`).

Data: the default evaluation pairs (the English pool and each language's sentences), L2-normalised.
References: Janeiro et al. 2024 (arXiv 2409.12737) section 3; Reimers & Gurevych 2020 Fig. 2.
Languages are macro-averaged. The spectra are kept for the run's plots (``memo["geometry_spectra"]``).
"""

from __future__ import annotations

import numpy as np

from babelspace.evaluation.results import TaskResult
from babelspace.evaluation.tasks.spec import TaskContext, TaskSpec

#: Neighbours counted for hubness (k-occurrence).
HUBNESS_K = 10

PER_LANGUAGE_KEYS = (
    "total_variance",
    "dim_std_min",
    "dim_std_median",
    "spectrum_rank",
    "anisotropy",
    "hubness_skew",
    "cross_hubness_skew",
)


def run(ctx: TaskContext) -> TaskResult:
    from babelspace.metrics.geometry import geometry

    data = ctx.data
    res = TaskResult(
        "geometry",
        config={
            **ctx.base_config(),
            "vectors": "L2-normalised",
            "hubness_k": HUBNESS_K,
            "total_variance": "1 - |mean|^2 of the unit vectors: complete collapse (a cone) near 0",
            "spectrum_rank": "effective rank of the covariance spectrum: dimensional collapse, blind to a cone",
            "anisotropy": "derived from total_variance: (n(1 - TV) - 1)/(n - 1), the mean pairwise cosine",
            "language_share": "between-language variance of the language means / total variance",
            "data": data.description,
        },
    )
    ctx.encode_groups(list(data.groups.values()))
    vectors = {"en": ctx.cache.encode(data.english_pool())}
    vectors |= {lang: ctx.cache.encode(g.xx) for lang, g in data.groups.items()}
    g = geometry(vectors, k=HUBNESS_K)
    res.per_language = g.per_language
    rows = list(g.per_language.values())
    res.average = {
        key: float(np.mean([r[key] for r in rows if r.get(key) is not None]))
        for key in PER_LANGUAGE_KEYS
        if any(r.get(key) is not None for r in rows)
    } | {"language_share": g.language_share, "pooled": g.pooled, "average": "macro over languages"}
    ctx.memo["geometry_spectra"] = g.spectra
    res.n_sentences = sum(len(v) for v in vectors.values())
    return res


SPEC = TaskSpec(
    name="geometry",
    description="per language: total variance of the normalised vectors (complete collapse: near 0), "
    "per-dimension std, spectrum rank (dimensional collapse), anisotropy (derived from the total "
    "variance), hubness, xx->en hubness; share of the variance that separates languages",
    metric="total_variance",
    unit="0-1",
    higher_is_better=True,
    column="total var",
    run=run,
)
