"""BUCC 2018 parallel-sentence mining (Zweigenbaum et al., "Overview of the Third BUCC Shared Task:
Spotting Parallel Sentences in Comparable Corpora", BUCC 2018), scored as LASER does
(Artetxe & Schwenk 2019, arXiv 1811.01136, and LASER's ``tasks/bucc``).

Protocol:

1. L2-normalise; for every source take its best target by ratio margin (k=4 neighbourhoods) among its
   k nearest targets (*forward*), and for every target its best source (*backward*).
2. Pool forward and backward candidates, sort by descending score and keep a pair only if neither its
   source nor its target was already taken (greedy one-to-one).
3. Choose the score threshold that maximises F1 on the **training** split and apply that same threshold
   to the **test** split (:func:`bucc_eval`). Precision, recall and F1 are in %.

:func:`optimistic_f1` instead reports the best F1 over thresholds chosen *on the evaluated data itself*
(what the sentence-transformers BUCC example reports). It is an upper bound, not the BUCC protocol.
MTEB's "BUCC" task is a different, easier one (gold pairs only, no distractors).

Reading and writing the task files, and building a BUCC-style task from any parallel corpus, is
:mod:`babelspace.evaluation.formats.bucc`.
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from dataclasses import dataclass

import numpy as np

from babelspace.retrieval.knn import (
    Backend,
    Candidates,
    Margin,
    greedy_one_to_one,
    l2_normalize,
    mutual_margin_candidates,
)

logger = logging.getLogger(__name__)

GoldPairs = Collection[tuple[int, int]]


@dataclass
class BuccResult:
    """BUCC protocol result: threshold tuned on train, P/R/F1 (%) on test, and the train F1 (%)."""

    threshold: float
    precision: float
    recall: float
    f1: float
    train_f1: float


@dataclass
class OptimisticBuccResult:
    """Best P/R/F1 (%) over thresholds tuned on the evaluated data itself: an optimistic upper bound."""

    threshold: float
    precision: float
    recall: float
    f1: float


@dataclass
class BuccSplit:
    """One split of a BUCC language pair: sentences with their ids and the gold id pairs."""

    src_lang: str
    tgt_lang: str
    src_ids: list[str]
    src_texts: list[str]
    tgt_ids: list[str]
    tgt_texts: list[str]
    gold: list[tuple[str, str]] | None

    def gold_indices(self) -> set[tuple[int, int]]:
        """Gold pairs as (source row, target row) indices."""
        if self.gold is None:
            raise ValueError("this split has no gold pairs")
        s = {sid: i for i, sid in enumerate(self.src_ids)}
        t = {tid: i for i, tid in enumerate(self.tgt_ids)}
        return {(s[a], t[b]) for a, b in self.gold}


@dataclass
class BuccTask:
    training: BuccSplit
    test: BuccSplit


# --------------------------------------------------------------------------- mining and scoring


def mine_candidates(
    src_emb: np.ndarray,
    tgt_emb: np.ndarray,
    k: int = 4,
    margin: Margin | str = Margin.RATIO,
    *,
    backend: Backend = "faiss",
    chunk_size: int = 16384,
) -> Candidates:
    """Forward + backward best candidates by margin (two kNN searches, retrieval ``max``), made one-to-one
    greedily by descending score."""
    src, tgt = l2_normalize(src_emb), l2_normalize(tgt_emb)
    if src.shape[0] == 0 or tgt.shape[0] == 0:
        empty = np.zeros(0, dtype=np.int64)
        return Candidates(empty, empty.copy(), np.zeros(0, dtype=np.float32))
    pool = mutual_margin_candidates(src, tgt, k, margin, "max", backend=backend, chunk_size=chunk_size)
    return pool.subset(greedy_one_to_one(pool.src, pool.tgt, pool.scores))


def _prf(correct: int, n_pred: int, n_gold: int) -> tuple[float, float, float]:
    p = correct / n_pred if n_pred else 0.0
    r = correct / n_gold if n_gold else 0.0
    f = 2 * p * r / (p + r) if p + r else 0.0
    return 100.0 * p, 100.0 * r, 100.0 * f


def precision_recall_f1(pairs: Collection[tuple[int, int]], gold: GoldPairs) -> tuple[float, float, float]:
    """Precision, recall and F1 (%) of predicted ``pairs`` against ``gold`` pairs."""
    gold_set = set(gold)
    correct = sum(1 for p in set(pairs) if p in gold_set)
    return _prf(correct, len(set(pairs)), len(gold_set))


def _sorted(candidates: Candidates) -> Candidates:
    return candidates.subset(np.argsort(-candidates.scores, kind="stable"))


def tune_threshold(candidates: Candidates, gold: GoldPairs) -> tuple[float, float, float, float]:
    """Threshold maximising F1 of ``candidates`` (accepted when score >= threshold): ``(t, P, R, F1)``.

    Only cuts between distinct scores are considered; the threshold is the midpoint between the last
    accepted and the first rejected score (the lowest score when every candidate is accepted). When no
    candidate is right, the threshold lies just above the best score (nothing accepted).
    """
    gold_set = set(gold)
    cands = _sorted(candidates)
    n = len(cands)
    if n == 0:
        return 0.0, 0.0, 0.0, 0.0
    hits = np.array([p in gold_set for p in cands.pairs()], dtype=np.int64)
    correct = np.cumsum(hits)
    best = (0.0, 0.0, 0.0, float(np.nextafter(np.float32(cands.scores[0]), np.float32(np.inf))))
    for i in range(n):
        if i + 1 < n and cands.scores[i + 1] == cands.scores[i]:
            continue  # cannot cut between equal scores
        p, r, f = _prf(int(correct[i]), i + 1, len(gold_set))
        if f > best[0]:
            t = (
                (float(cands.scores[i]) + float(cands.scores[i + 1])) / 2
                if i + 1 < n
                else float(cands.scores[i])
            )
            best = (f, p, r, t)
    f, p, r, t = best
    return t, p, r, f


def apply_threshold(candidates: Candidates, threshold: float) -> Candidates:
    """The candidates whose score is >= ``threshold``."""
    return candidates.subset(candidates.scores >= threshold)


def bucc_eval_candidates(
    train_candidates: Candidates,
    train_gold: GoldPairs,
    test_candidates: Candidates,
    test_gold: GoldPairs,
) -> BuccResult:
    """BUCC protocol on already mined candidates: tune the threshold on train, apply it to test."""
    threshold, _, _, train_f1 = tune_threshold(train_candidates, train_gold)
    accepted = apply_threshold(test_candidates, threshold)
    p, r, f = precision_recall_f1(accepted.pairs(), test_gold)
    logger.info(
        "BUCC: threshold %.4f (train F1 %.2f) -> test P %.2f R %.2f F1 %.2f", threshold, train_f1, p, r, f
    )
    return BuccResult(threshold=threshold, precision=p, recall=r, f1=f, train_f1=train_f1)


def bucc_eval(
    train_src_emb: np.ndarray,
    train_tgt_emb: np.ndarray,
    train_gold: GoldPairs,
    test_src_emb: np.ndarray,
    test_tgt_emb: np.ndarray,
    test_gold: GoldPairs,
    *,
    k: int = 4,
    margin: Margin | str = Margin.RATIO,
    backend: Backend = "faiss",
) -> BuccResult:
    """BUCC 2018 protocol (LASER): mine both splits, tune the threshold on train, report test P/R/F1."""
    train = mine_candidates(train_src_emb, train_tgt_emb, k, margin, backend=backend)
    test = mine_candidates(test_src_emb, test_tgt_emb, k, margin, backend=backend)
    return bucc_eval_candidates(train, train_gold, test, test_gold)


def optimistic_f1(
    src_emb: np.ndarray,
    tgt_emb: np.ndarray,
    gold: GoldPairs,
    *,
    k: int = 4,
    margin: Margin | str = Margin.RATIO,
    backend: Backend = "faiss",
) -> OptimisticBuccResult:
    """OPTIMISTIC: best F1 over thresholds tuned on this same data (sentence-transformers example).

    Not the BUCC protocol (use :func:`bucc_eval`); an upper bound useful when only one split exists.
    """
    cands = mine_candidates(src_emb, tgt_emb, k, margin, backend=backend)
    t, p, r, f = tune_threshold(cands, gold)
    return OptimisticBuccResult(threshold=t, precision=p, recall=r, f1=f)
