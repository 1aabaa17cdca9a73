"""Tatoeba translation retrieval (Artetxe & Schwenk 2019, "Massively Multilingual Sentence
Embeddings for Zero-Shot Cross-Lingual Transfer and Beyond", TACL; LASER's ``data/tatoeba/v1``).

Protocol: up to 1,000 aligned sentences per language with English; L2-normalise, cosine, top-1
(plain arg-max, no margin). Accuracy in % in both directions. sentence-transformers reports the mean of
both directions, MTEB only xx -> en; :class:`TatoebaResult` carries all three.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

from babelspace.retrieval.knn import Backend, knn_search, l2_normalize

logger = logging.getLogger(__name__)


@dataclass
class TatoebaResult:
    """Top-1 accuracies in % (0-100)."""

    xx_to_en: float
    en_to_xx: float
    mean: float


def top1_accuracy(queries: np.ndarray, targets: np.ndarray, *, backend: Backend = "faiss") -> float:
    """% of rows i whose cosine nearest target is target i."""
    n = queries.shape[0]
    if n == 0:
        return 0.0
    _, ids = knn_search(l2_normalize(queries), l2_normalize(targets), 1, backend=backend)
    return 100.0 * float(np.mean(ids[:, 0] == np.arange(n)))


def tatoeba_accuracy(xx_emb: np.ndarray, en_emb: np.ndarray, *, backend: Backend = "faiss") -> TatoebaResult:
    """Cosine top-1 accuracy of aligned ``xx_emb[i] <-> en_emb[i]`` in both directions and their mean."""
    if xx_emb.shape[0] != en_emb.shape[0]:
        raise ValueError(f"aligned sets must have equal sizes, got {xx_emb.shape[0]} and {en_emb.shape[0]}")
    fwd = top1_accuracy(xx_emb, en_emb, backend=backend)
    bwd = top1_accuracy(en_emb, xx_emb, backend=backend)
    return TatoebaResult(xx_to_en=fwd, en_to_xx=bwd, mean=(fwd + bwd) / 2)
