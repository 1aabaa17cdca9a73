"""Semantic textual similarity: STS 2017 (Cer et al., SemEval-2017 Task 1) and the STS benchmark.

Protocol (as in Reimers & Gurevych 2020, "Making Monolingual Sentence Embeddings Multilingual using
Knowledge Distillation", arXiv 2004.09813, §4-5): cosine similarity of the two sentence vectors,
Spearman rank correlation x 100 against the gold scores (0-5).

Language bias (same paper, §7): the sets of several language pairs are joined and scored together; a
model that scores same-language pairs higher than cross-language pairs of equal meaning loses rank
correlation on the joined set compared with the mean of the per-set correlations
(:func:`language_bias`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from scipy.stats import spearmanr

from babelspace.retrieval.knn import l2_normalize

logger = logging.getLogger(__name__)


@dataclass
class LanguageBiasResult:
    """Spearman x 100 per set, their mean, on the joined set, and ``drop = mean_per_set - joined``."""

    per_set: dict[str, float]
    mean_per_set: float
    joined: float
    drop: float


def cosine_rowwise(emb1: np.ndarray, emb2: np.ndarray) -> np.ndarray:
    """Cosine similarity of ``emb1[i]`` and ``emb2[i]`` for every row: float32 [n]."""
    if emb1.shape != emb2.shape:
        raise ValueError(f"shape mismatch {emb1.shape} vs {emb2.shape}")
    return np.einsum("ij,ij->i", l2_normalize(emb1), l2_normalize(emb2))


def sts_spearman(emb1: np.ndarray, emb2: np.ndarray, gold: np.ndarray) -> float:
    """Spearman rank correlation x 100 between the pair cosines and the ``gold`` scores."""
    gold = np.asarray(gold, dtype=np.float64)
    if gold.shape != (emb1.shape[0],):
        raise ValueError(f"{gold.shape[0] if gold.ndim else 0} gold scores for {emb1.shape[0]} pairs")
    cos = cosine_rowwise(emb1, emb2).astype(np.float64)
    return 100.0 * float(spearmanr(cos, gold).statistic)


def language_bias(sets: Mapping[str, tuple[np.ndarray, np.ndarray, np.ndarray]]) -> LanguageBiasResult:
    """Language bias (Reimers & Gurevych 2020, §7) from ``{name: (emb1, emb2, gold)}``, e.g. en-en, de-de, en-de.

    Returns the Spearman x 100 of each set, their mean, the Spearman on all sets joined into one, and
    ``drop = mean_per_set - joined`` (positive: the model's scores depend on the language pair).
    """
    if not sets:
        raise ValueError("language_bias needs at least one set")
    per_set = {name: sts_spearman(e1, e2, g) for name, (e1, e2, g) in sets.items()}
    cos = np.concatenate([cosine_rowwise(e1, e2) for e1, e2, _ in sets.values()]).astype(np.float64)
    gold = np.concatenate([np.asarray(g, dtype=np.float64) for _, _, g in sets.values()])
    joined = 100.0 * float(spearmanr(cos, gold).statistic)
    mean = float(np.mean(list(per_set.values())))
    return LanguageBiasResult(per_set=per_set, mean_per_set=mean, joined=joined, drop=mean - joined)
