"""``--threshold auto``: the loosest margin threshold whose estimated precision on *this* run reaches a
target (default 0.9).

A margin threshold belongs to an embedding space and a corpus: LASER's 1.06 (Artetxe & Schwenk 2019,
§4.2) fits LASER, and a threshold tuned for F1 on planted Bible verses does not carry its precision to
other text or to another share of true pairs. So the threshold is calibrated on the user's own
sentences with a decoy search (target-decoy estimation of false discoveries, Elias & Gygi 2007):

1. The run's full search also gives the *mutual* candidates (each other's best by margin): where a
   corpus holds a translation pair, it is almost always one of these.
2. The sources are split in two random folds. Each fold is mined again (same model vectors, ``k``,
   margin and retrieval) against every target *except the mutual partners of its own sources*. Such a
   decoy corpus keeps the user's domain, neighbourhoods and size, but (nearly) none of the true pairs,
   so its one-to-one pairs estimate how often an unpaired sentence reaches a score: the false
   acceptance rate ``FAR(t)`` = decoy pairs scoring >= t / decoy pairs.
3. On the real run, a threshold ``t`` keeping ``kept(t)`` of the ``N`` one-to-one pairs has about
   ``N · FAR(t)`` false pairs: estimated precision ``1 − N · FAR(t) / kept(t)``. Every one-to-one pair
   is counted as possibly false (conservative: the true share is unknown), and the decoy count gets
   the ``+1`` of finite-sample target-decoy estimates, so a small corpus cannot claim a precision its
   decoy is too small to show. The share of true pairs is the run's own, not an assumed one.
4. The threshold is the lowest pair score at which the estimate reaches the target; if none does,
   nothing is kept and the run says so.
5. With a language pair the Bible has (``--src-lang``/``--tgt-lang``), known parallel verses of the
   Bible *development* books are planted into each decoy fold (a tenth of its size); the share of them
   mined correctly at ``>= t`` estimates the recall. Without one the threshold is calibrated all the
   same (the decoy needs no known pairs) and the recall is not estimated.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np

from babelspace.mining.core import MiningConfig, mine_at
from babelspace.mining.shards import ArrayMatrix, Matrix
from babelspace.retrieval.knn import Candidates

logger = logging.getLogger(__name__)

#: Default ``--target-precision``.
TARGET_PRECISION = 0.9
#: Rows of each side of a decoy fold at most (a random subset beyond; the margin's normalisation by
#: the neighbourhood keeps false scores nearly independent of the corpus size). Fewer when the fold's
#: vectors would take more than a quarter of ``--max-memory``; its search gets the rest of the budget.
DECOY_MAX_ROWS = 20_000
#: Known pairs planted into a decoy fold, as a share of its sources.
GOLD_SHARE = 0.1


@dataclass(frozen=True)
class Calibration:
    """The chosen threshold and what the calibration estimates for the run at it."""

    threshold: float
    target_precision: float
    precision: float  # estimated precision of the kept pairs (0..1)
    recall: float | None  # share of planted known pairs kept and right; None without known pairs
    kept: int
    expected_false: float
    reached: bool  # False: no threshold reaches the target, nothing is kept
    one_to_one: int
    decoy_pairs: int
    gold: int
    src_lang: str | None
    tgt_lang: str | None

    def describe(self) -> str:
        recall = (
            f"recall {100 * self.recall:.1f}% of {self.gold} planted Bible dev "
            f"{self.src_lang}-{self.tgt_lang} pairs"
            if self.recall is not None
            else "recall not estimated (no --src-lang/--tgt-lang pair of the Bible)"
        )
        return (
            f"auto: target precision {100 * self.target_precision:.0f}%, estimated precision "
            f"{100 * self.precision:.1f}% ({self.expected_false:.1f} of {self.kept} kept expected false; "
            f"{self.decoy_pairs} decoy pairs), {recall}"
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Estimate:
    """Per candidate threshold (the run's one-to-one scores, descending): pairs kept, expected false
    pairs and estimated precision."""

    thresholds: np.ndarray
    kept: np.ndarray
    expected_false: np.ndarray

    @property
    def precision(self) -> np.ndarray:
        return np.clip(1.0 - self.expected_false / np.maximum(self.kept, 1), 0.0, 1.0)


def estimate_precision(scores: np.ndarray, decoy_scores: np.ndarray) -> Estimate:
    """Target-decoy estimate at every score of ``scores`` (the run's one-to-one pairs): false pairs
    ``N · (D(t) + 1) / (n_decoy + 1)`` with ``D(t)`` the decoy pairs scoring ``>= t``."""
    t = np.sort(np.asarray(scores, dtype=np.float64))[::-1]
    asc = t[::-1]
    d = np.sort(np.asarray(decoy_scores, dtype=np.float64))
    kept = len(t) - np.searchsorted(asc, t, side="left")
    decoys = len(d) - np.searchsorted(d, t, side="left")
    expected_false = len(t) * (decoys + 1) / (len(d) + 1)
    return Estimate(t, kept, np.minimum(expected_false, kept))


def choose_threshold(
    scores: np.ndarray, decoy_scores: np.ndarray, target: float
) -> tuple[float, float, int, float, bool]:
    """(threshold, estimated precision, kept, expected false, reached): the lowest score of ``scores``
    whose estimated precision reaches ``target``; when none does, a threshold above every score."""
    est = estimate_precision(scores, decoy_scores)
    if not len(est.thresholds):
        return float("inf"), 0.0, 0, 0.0, False
    precision = est.precision
    ok = np.nonzero(precision >= target)[0]
    if len(ok):
        j = int(ok[-1])
        return (
            float(est.thresholds[j]),
            float(precision[j]),
            int(est.kept[j]),
            float(est.expected_false[j]),
            True,
        )
    best = int(np.argmax(precision))
    logger.warning(
        "no threshold reaches the target precision %.2f on this run (at best an estimated %.2f, keeping "
        "%d pairs at %.4f; %d decoy pairs): nothing is kept. Lower --target-precision, give --threshold "
        "T, or use a model that pairs these languages (a corpus of a few dozen sentences is too small "
        "for its decoys to show a high precision)",
        target,
        precision[best],
        est.kept[best],
        est.thresholds[best],
        len(decoy_scores),
    )
    above = np.nextafter(np.float32(est.thresholds[0]), np.float32(np.inf))  # above every float32 score
    return float(above), 0.0, 0, 0.0, False


def decoy_folds(
    src: Matrix,
    tgt: Matrix,
    mutual: Candidates,
    config: MiningConfig,
    gold: tuple[np.ndarray, np.ndarray] | None = None,
) -> tuple[np.ndarray, np.ndarray, int]:
    """(decoy pair scores, scores of planted pairs mined right, planted pairs): mine each of two
    source folds against the targets that are not its sources' mutual partners (see the module
    docstring), with half of ``gold`` (known pair vectors) planted into each."""
    rng = np.random.default_rng(config.seed)
    n, m = len(src), len(tgt)
    partner = np.full(n, -1, dtype=np.int64)
    partner[mutual.src] = mutual.tgt
    order = rng.permutation(n)
    gold_order = rng.permutation(len(gold[0])) if gold is not None else np.zeros(0, np.int64)
    decoys, hits, planted = [], [], 0
    cap = max(1, min(DECOY_MAX_ROWS, config.max_memory // (4 * 2 * 4 * max(1, src.dim))))
    fold_config = replace(
        config,
        threshold=float("-inf"),
        show_progress=False,
        max_memory=config.max_memory - 2 * 4 * src.dim * cap,
    )
    for f, fold in enumerate((order[: n // 2], order[n // 2 :])):
        targets = np.setdiff1d(np.arange(m), partner[fold])
        xs, xt = src.take(_cap(fold, cap, rng)), tgt.take(_cap(targets, cap, rng))
        if len(xs) == 0 or len(xt) == 0:
            continue
        g = gold_order[f::2][: max(1, round(GOLD_SHARE * len(xs)))] if gold is not None else gold_order
        us, ut = len(xs), len(xt)
        if len(g):
            xs, xt = np.vstack([xs, gold[0][g]]), np.vstack([xt, gold[1][g]])
        p = mine_at(ArrayMatrix(xs), ArrayMatrix(xt), fold_config, float("-inf")).pairs
        decoys.append(p.scores[(p.src < us) & (p.tgt < ut)])
        hits.append(p.scores[(p.src >= us) & (p.src - us == p.tgt - ut)])
        planted += len(g)
    empty = np.zeros(0, np.float32)
    return np.concatenate(decoys or [empty]), np.concatenate(hits or [empty]), planted


def _cap(ids: np.ndarray, cap: int, rng: np.random.Generator) -> np.ndarray:
    """At most ``cap`` of ``ids`` (a random subset), sorted."""
    if len(ids) > cap:
        ids = rng.choice(ids, cap, replace=False)
    return np.sort(ids)


def calibrate(
    src: Matrix,
    tgt: Matrix,
    one_to_one: Candidates,
    mutual: Candidates,
    config: MiningConfig,
    gold: tuple[np.ndarray, np.ndarray] | None = None,
) -> Calibration:
    """The auto threshold of a run whose one-to-one pairs (any score) are ``one_to_one`` and mutual
    candidates ``mutual``; ``gold``: vectors of known pairs (row i of each) for the recall estimate."""
    decoy_scores, hit_scores, planted = decoy_folds(src, tgt, mutual, config, gold)
    threshold, precision, kept, false, reached = choose_threshold(
        one_to_one.scores, decoy_scores, config.target_precision
    )
    recall = float(np.sum(hit_scores >= threshold) / planted) if planted else None
    cal = Calibration(
        threshold=threshold,
        target_precision=config.target_precision,
        precision=precision,
        recall=recall,
        kept=kept,
        expected_false=round(false, 2),
        reached=reached,
        one_to_one=len(one_to_one),
        decoy_pairs=len(decoy_scores),
        gold=planted,
        src_lang=config.src_lang,
        tgt_lang=config.tgt_lang,
    )
    logger.info("mining threshold %.4f (%s)", threshold, cal.describe())
    return cal


@dataclass(frozen=True)
class NullCalibration:
    """``babelspace score``'s auto threshold: estimated against the scores of shuffled rows."""

    threshold: float
    target_precision: float
    precision: float  # estimated precision of the rows kept at the threshold
    kept: int
    expected_false: float
    unrelated_share: float  # estimated share of unrelated rows among the scored ones
    reached: bool
    rows: int
    null_rows: int

    def describe(self) -> str:
        reach = "" if self.reached else f" (no threshold reaches {100 * self.target_precision:.0f}%)"
        return (
            f"auto: target precision {100 * self.target_precision:.0f}%, estimate "
            f"{100 * self.precision:.1f}% against shuffled rows{reach} ({self.expected_false:.1f} of "
            f"{self.kept} kept expected unrelated; {100 * self.unrelated_share:.0f}% of the rows look "
            "unrelated). Rows that are near-translations score between the two and are not estimated"
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def null_threshold(scores: np.ndarray, null: np.ndarray, target: float) -> NullCalibration:
    """The loosest threshold whose estimated precision reaches ``target``, for rows of a bitext that
    are either translations or unrelated: ``null`` are scores of unrelated rows (the bitext's own
    sentences, shuffled), the share of unrelated rows is Storey's estimate ``2 · #{score < median
    null} / n`` (translations score above nearly every unrelated row), and a threshold ``t`` keeping
    ``kept(t)`` rows expects ``share · n · (#{null >= t} + 1) / (#null + 1)`` unrelated ones."""
    s = np.sort(np.asarray(scores, dtype=np.float64))[::-1]
    d = np.sort(np.asarray(null, dtype=np.float64))
    n = len(s)
    if n == 0 or len(d) == 0:
        return NullCalibration(float("inf"), target, 0.0, 0, 0.0, 1.0, False, n, len(d))
    share = min(1.0, 2.0 * float(np.sum(s < np.median(d))) / n)
    kept = n - np.searchsorted(s[::-1], s, side="left")
    false = np.minimum(share * n * (len(d) - np.searchsorted(d, s, side="left") + 1) / (len(d) + 1), kept)
    precision = 1.0 - false / np.maximum(kept, 1)
    ok = np.nonzero(precision >= target)[0]
    reached = bool(len(ok))
    j = int(ok[-1]) if reached else int(np.argmax(precision))
    if not reached:
        logger.warning(
            "no threshold reaches the target precision %.2f against shuffled rows (at best %.2f): keeping the "
            "%d rows at that best threshold %.4f; give --threshold T or lower --target-precision",
            target,
            precision[j],
            kept[j],
            s[j],
        )
    return NullCalibration(
        float(s[j]), target, float(precision[j]), int(kept[j]), round(float(false[j]), 2), round(share, 4),
        reached, n, len(d),
    )  # fmt: skip
