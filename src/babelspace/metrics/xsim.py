"""xsim: margin-based similarity-search error rate (LASER ``source/xsim.py`` protocol).

Protocol (Artetxe & Schwenk 2019 margin; LASER's xsim as used for FLORES in the LASER3,
SONAR and MEXMA papers):

1. L2-normalise source (xx) and target (English) vectors.
2. For every source take its ``k`` (default 4) nearest targets by cosine as candidates and
   re-score each with the margin: ``ratio`` cos / ((a + b) / 2), ``distance`` cos - (a + b) / 2,
   ``absolute`` cos, where a = mean cosine of the source to its k nearest targets (over the whole
   target pool) and b = mean cosine of the candidate target to its k nearest sources (over the whole
   source pool).
3. The prediction is the best-scoring candidate. An error is a prediction other than the gold target
   index (gold defaults to the identity: source i <-> target i), or, when target texts are given, a
   predicted target whose *text* differs from the gold target's text (duplicate targets count as right).
4. Error rate % = 100 * errors / n. Totals over several languages are micro-averaged
   (:func:`xsim_multi`).

``candidates`` widens step 2 beyond the k nearest; ``candidates=len(tgt)`` takes the arg-max of the
margin over every target. LASER uses ``candidates = k``, the default here.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from babelspace.retrieval.knn import Backend, Margin, l2_normalize, margin_knn

logger = logging.getLogger(__name__)


@dataclass
class XsimResult:
    """Errors of one xsim run. ``error_rate`` is a percentage (0-100)."""

    errors: int
    n: int
    error_rate: float
    predictions: np.ndarray | None = field(default=None, repr=False, compare=False)
    examples: list[tuple[str, str, str]] = field(default_factory=list, repr=False, compare=False)
    """Up to ``max_examples`` (source text, predicted target text, gold target text) for wrong predictions."""


def xsim_predict(
    src_emb: np.ndarray,
    tgt_emb: np.ndarray,
    *,
    margin: Margin | str = Margin.RATIO,
    k: int = 4,
    candidates: int | None = None,
    backend: Backend = "faiss",
    chunk_size: int = 16384,
) -> np.ndarray:
    """Index of the best target (by margin) for every source: int64 [n]."""
    src = l2_normalize(src_emb)
    tgt = l2_normalize(tgt_emb)
    _, ids = margin_knn(src, tgt, k, margin, candidates, backend=backend, chunk_size=chunk_size)
    return ids[:, 0].copy()


def xsim_errors(
    src_emb: np.ndarray,
    tgt_emb: np.ndarray,
    *,
    margin: Margin | str = Margin.RATIO,
    k: int = 4,
    src_texts: Sequence[str] | None = None,
    tgt_texts: Sequence[str] | None = None,
    gold: Sequence[int] | np.ndarray | None = None,
    candidates: int | None = None,
    backend: Backend = "faiss",
    chunk_size: int = 16384,
    max_examples: int = 10,
) -> XsimResult:
    """xsim error count and rate of sources ``src_emb`` [n, d] retrieving targets ``tgt_emb`` [m, d].

    Args:
        margin: ``Margin.RATIO`` (LASER default), ``DISTANCE`` or ``ABSOLUTE``.
        k: neighbourhood size of the margin (LASER: 4).
        src_texts: optional source texts, only used to fill ``XsimResult.examples``.
        tgt_texts: optional target texts; when given, an error is a predicted target whose text differs
            from the gold target's text, so duplicate targets count as right.
        gold: gold target index of each source; default identity (requires n <= m).
        candidates: margin candidates per source (default ``k``, as LASER).
    """
    n = src_emb.shape[0]
    if gold is None:
        if n > tgt_emb.shape[0]:
            raise ValueError(
                f"identity gold needs at least as many targets ({tgt_emb.shape[0]}) as sources ({n})"
            )
        gold_arr = np.arange(n, dtype=np.int64)
    else:
        gold_arr = np.asarray(gold, dtype=np.int64)
        if gold_arr.shape != (n,):
            raise ValueError(f"gold must hold one target index per source ({n}), got shape {gold_arr.shape}")
    if tgt_texts is not None and len(tgt_texts) != tgt_emb.shape[0]:
        raise ValueError(f"{len(tgt_texts)} target texts for {tgt_emb.shape[0]} target vectors")
    if src_texts is not None and len(src_texts) != n:
        raise ValueError(f"{len(src_texts)} source texts for {n} source vectors")
    if n == 0:
        return XsimResult(0, 0, 0.0, np.zeros(0, dtype=np.int64))

    pred = xsim_predict(
        src_emb, tgt_emb, margin=margin, k=k, candidates=candidates, backend=backend, chunk_size=chunk_size
    )
    if tgt_texts is not None:
        wrong = np.array(
            [tgt_texts[p] != tgt_texts[g] for p, g in zip(pred, gold_arr, strict=True)], dtype=bool
        )
    else:
        wrong = pred != gold_arr
    errors = int(wrong.sum())
    examples: list[tuple[str, str, str]] = []
    if tgt_texts is not None and src_texts is not None:
        for i in np.flatnonzero(wrong)[:max_examples]:
            examples.append((src_texts[i], tgt_texts[pred[i]], tgt_texts[gold_arr[i]]))
    result = XsimResult(
        errors=errors, n=n, error_rate=100.0 * errors / n, predictions=pred, examples=examples
    )
    logger.debug(
        "xsim (%s, k=%d): %d/%d errors (%.2f%%)", Margin(margin).value, k, errors, n, result.error_rate
    )
    return result


def xsim_both_directions(
    x_emb: np.ndarray,
    y_emb: np.ndarray,
    *,
    margin: Margin | str = Margin.RATIO,
    k: int = 4,
    x_texts: Sequence[str] | None = None,
    y_texts: Sequence[str] | None = None,
    backend: Backend = "faiss",
) -> tuple[XsimResult, XsimResult]:
    """xsim of aligned sets x[i] <-> y[i] in both directions: ``(x -> y, y -> x)``.

    Text-based errors in each direction use the texts of that direction's targets when given.
    """
    if x_emb.shape[0] != y_emb.shape[0]:
        raise ValueError(f"aligned sets must have equal sizes, got {x_emb.shape[0]} and {y_emb.shape[0]}")
    fwd = xsim_errors(x_emb, y_emb, margin=margin, k=k, src_texts=x_texts, tgt_texts=y_texts, backend=backend)
    bwd = xsim_errors(y_emb, x_emb, margin=margin, k=k, src_texts=y_texts, tgt_texts=x_texts, backend=backend)
    return fwd, bwd


def xsim_multi(results: Mapping[str, XsimResult]) -> XsimResult:
    """Micro-averaged total over languages: 100 * sum(errors) / sum(n)."""
    errors = sum(r.errors for r in results.values())
    n = sum(r.n for r in results.values())
    return XsimResult(errors=errors, n=n, error_rate=100.0 * errors / n if n else 0.0)
