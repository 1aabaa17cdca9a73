"""``--threshold auto``: a margin threshold for a target precision (default 0.9), with the precision
of the kept pairs reported as an **interval** estimated on *this* run.

A margin threshold belongs to an embedding space and a corpus: LASER's 1.06 (Artetxe & Schwenk 2019,
§4.2) fits LASER, and a threshold tuned on planted Bible verses does not carry its precision to other
text or to another share of true pairs. So the threshold is calibrated on the user's own sentences by
target-decoy estimation of false discoveries (Elias & Gygi 2007), with two kinds of decoys that err in
opposite directions:

1. **Cross-lingual decoys (the high end).** The sources are split in two random folds; each fold is
   mined again (same vectors, ``k``, margin and retrieval) against every target *except the mutual
   partners of its own sources* (where a corpus holds a translation pair, it is almost always a mutual
   one). Such a decoy keeps the domain and neighbourhoods but (nearly) none of the true pairs. It also
   loses the strongest *false* pairs, the unrelated sentences that are each other's best neighbours,
   so its false acceptance rate is too low: the precision it implies is an upper bound (measured: the
   high end was at or above the kept pairs' precision in every cell of docs/mining.md's table).
2. **Monolingual decoys (the low end).** Each side is split in two random halves mined against each
   other: no translations at all, and the best-neighbour structure intact, but paraphrases and
   near-repeats within one language score higher than unrelated text across languages, so its false
   acceptance rate is too high and the precision it implies is a lower bound.
3. At a threshold ``t`` keeping ``kept(t)`` of the run's ``N`` one-to-one pairs, each decoy with a
   false acceptance rate ``FAR(t)`` (decoy pairs scoring >= t / decoy pairs) implies ``N · FAR(t)``
   false pairs. The low end counts every one-to-one pair as possibly false and adds the ``+1`` of
   finite-sample target-decoy estimates (a small corpus cannot claim a precision its decoy is too
   small to show); the high end counts only the pairs that look unrelated (Storey's estimate: twice
   those scoring below the decoys' median) and has no ``+1``. The interval is ``[1 − false_mono / kept, 1 − false_cross /
   kept]``; the threshold is the lowest pair score at which its **midpoint** reaches the target.
4. When no threshold does, nothing is kept and the run says so. A run too small for its decoys (fewer
   than :data:`MIN_DECOY_PAIRS` decoy pairs; its decoy folds are so small that their margins inflate)
   keeps the pairs the high end allows but none below the margin's fixed threshold (LASER's 1.06 for
   the ratio margin), or the pairs at that fixed threshold when the high end does not reach the
   target, with a warning that the estimate is uncertain at this size, instead of nothing silently.
5. With a language pair the Bible has (``--src-lang``/``--tgt-lang``), known parallel verses of the
   Bible *development* books are planted into each cross-lingual fold (a tenth of its size); the share
   of them mined correctly at ``>= t`` estimates the recall.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np

from babelspace.mining.core import DEFAULT_THRESHOLDS, MiningConfig, mine_at
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
#: Below this many cross-lingual decoy pairs a run is too small for its estimate (see the docstring).
MIN_DECOY_PAIRS = 100
#: What the reported precision is (the summary's ``precision_kind``).
PRECISION_KIND = "interval"


@dataclass(frozen=True)
class Calibration:
    """The chosen threshold and what the calibration estimates for the run at it."""

    threshold: float
    target_precision: float
    precision_low: float  # the interval of the kept pairs' precision (monolingual decoys, +1)
    precision_high: float  # ... (cross-lingual decoys: an upper bound)
    precision_midpoint: float  # what the threshold was chosen by
    recall: float | None  # share of planted known pairs kept and right; None without known pairs
    kept: int
    reached: bool  # False: no threshold reaches the target
    small: bool  # too few decoy pairs: the estimate is uncertain at this size
    fixed: bool  # ... and so small that the fixed threshold of the margin (LASER's 1.06) was used
    one_to_one: int
    decoy_pairs: int
    monolingual_decoy_pairs: int
    gold: int
    src_lang: str | None
    tgt_lang: str | None
    precision_kind: str = PRECISION_KIND

    def describe(self) -> str:
        recall = (
            f"recall {100 * self.recall:.1f}% of {self.gold} planted Bible dev "
            f"{self.src_lang}-{self.tgt_lang} pairs"
            if self.recall is not None
            else "recall not estimated (no --src-lang/--tgt-lang pair of the Bible)"
        )
        note = "" if self.reached else " (not reached)"
        if self.fixed:
            note += f"; too small to calibrate: the fixed threshold {self.threshold:g} is used"
        size = "; uncertain at this size" if self.small else ""
        return (
            f"auto: target precision {100 * self.target_precision:.0f}%{note}; precision of the {self.kept} kept "
            f"pairs estimated as the interval [{100 * self.precision_low:.1f}%, {100 * self.precision_high:.1f}%] "
            f"(midpoint {100 * self.precision_midpoint:.1f}%; low end from {self.monolingual_decoy_pairs} "
            f"monolingual, high end from {self.decoy_pairs} cross-lingual decoy pairs{size}), {recall}"
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _at_or_above(sorted_values: np.ndarray, t: np.ndarray) -> np.ndarray:
    return len(sorted_values) - np.searchsorted(sorted_values, t, side="left")


@dataclass(frozen=True)
class Estimate:
    """Per candidate threshold (the run's one-to-one scores, descending): pairs kept and the false
    pairs each end of the interval expects."""

    thresholds: np.ndarray
    kept: np.ndarray
    false_high: np.ndarray  # from the monolingual decoys (+1): the low end of the precision
    false_low: np.ndarray  # from the cross-lingual decoys: the high end

    @property
    def precision_low(self) -> np.ndarray:
        return np.clip(1.0 - self.false_high / np.maximum(self.kept, 1), 0.0, 1.0)

    @property
    def precision_high(self) -> np.ndarray:
        return np.clip(1.0 - self.false_low / np.maximum(self.kept, 1), 0.0, 1.0)

    @property
    def precision(self) -> np.ndarray:
        """The interval's midpoint."""
        return (self.precision_low + self.precision_high) / 2


def estimate_precision(
    scores: np.ndarray, decoy_scores: np.ndarray, monolingual_scores: np.ndarray | None = None
) -> Estimate:
    """The interval at every score of ``scores`` (the run's one-to-one pairs): false pairs
    ``N · D(t) / n`` from the cross-lingual decoys and ``N · (M(t) + 1) / (m + 1)`` from the
    monolingual ones (``D(t)``, ``M(t)``: decoy pairs scoring ``>= t``; without monolingual decoys the
    cross-lingual ones with the ``+1``)."""
    t = np.sort(np.asarray(scores, dtype=np.float64))[::-1]
    d = np.sort(np.asarray(decoy_scores, dtype=np.float64))
    mono = d if monolingual_scores is None else np.sort(np.asarray(monolingual_scores, dtype=np.float64))
    kept = len(t) - np.searchsorted(t[::-1], t, side="left")
    # the high end counts only the pairs that look unrelated (Storey's share: twice those below the decoys'
    # median); the low end counts every one-to-one pair as possibly false
    unrelated = min(len(t), 2 * int(np.sum(t < np.median(d)))) if len(d) else len(t)
    low = unrelated * _at_or_above(d, t) / max(1, len(d))
    high = len(t) * (_at_or_above(mono, t) + 1) / (len(mono) + 1)
    return Estimate(t, kept, np.minimum(high, kept), np.minimum(low, kept))


@dataclass(frozen=True)
class Choice:
    """The threshold :func:`choose_threshold` picked and the estimate at it."""

    threshold: float
    precision: float  # midpoint
    precision_low: float
    precision_high: float
    kept: int
    reached: bool
    small: bool
    fixed: bool = False  # a run too small to calibrate: the fixed fallback threshold was used


def _choice(est: Estimate, j: int, reached: bool, small: bool, fallback: bool = False) -> Choice:
    return Choice(
        float(est.thresholds[j]),
        float(est.precision[j]),
        float(est.precision_low[j]),
        float(est.precision_high[j]),
        int(est.kept[j]),
        reached,
        small,
        fallback,
    )


def choose_threshold(
    scores: np.ndarray,
    decoy_scores: np.ndarray,
    target: float,
    monolingual_scores: np.ndarray | None = None,
    fallback: float | None = None,
) -> Choice:
    """The lowest score of ``scores`` whose interval midpoint reaches ``target``. A run with fewer than
    :data:`MIN_DECOY_PAIRS` decoy pairs takes the high end instead, never below the fixed ``fallback``
    threshold, and the fixed threshold when the high end does not reach the target (warned either way).
    When nothing is left, a threshold above every score."""
    est = estimate_precision(scores, decoy_scores, monolingual_scores)
    small = len(decoy_scores) < MIN_DECOY_PAIRS
    if not len(est.thresholds):
        return Choice(float("inf"), 0.0, 0.0, 0.0, 0, False, small)
    ok = np.nonzero(est.precision >= target)[0]
    if len(ok):
        return _choice(est, int(ok[-1]), True, small)
    if small:
        ok = np.nonzero(est.precision_high >= target)[0]
        high_ok = bool(len(ok)) and (fallback is None or est.thresholds[int(ok[-1])] >= fallback)
        use_fixed = not high_ok and fallback is not None and bool(np.any(est.thresholds >= fallback))
        logger.warning(
            "the precision estimate is uncertain at this size (%d one-to-one pairs, %d decoy pairs): %s; check "
            "a sample of the pairs, or give --threshold T",
            len(est.thresholds),
            len(decoy_scores),
            "keeping the pairs the estimate's high end allows"
            if high_ok
            else f"keeping the pairs at or above the fixed threshold {fallback}"
            if use_fixed
            else f"no pair reaches the fixed threshold {fallback} either",
        )
        if high_ok:
            return _choice(est, int(ok[-1]), False, small)
        if use_fixed:
            j = int(np.nonzero(est.thresholds >= fallback)[0][-1])
            return replace(_choice(est, j, False, small, True), threshold=float(fallback))
    best = int(np.argmax(est.precision))
    logger.warning(
        "no threshold reaches the target precision %.2f on this run (at best an interval midpoint of %.2f, "
        "keeping %d pairs at %.4f): nothing is kept. Lower --target-precision, give --threshold T, or use a "
        "model that pairs these languages",
        target,
        est.precision[best],
        est.kept[best],
        est.thresholds[best],
    )
    above = np.nextafter(np.float32(est.thresholds[0]), np.float32(np.inf))  # above every float32 score
    return Choice(float(above), 0.0, 0.0, 0.0, 0, False, small)


def _fold_config(config: MiningConfig, dim: int, cap: int) -> MiningConfig:
    return replace(
        config, threshold=float("-inf"), show_progress=False, max_memory=config.max_memory - 2 * 4 * dim * cap
    )


def _decoy_cap(config: MiningConfig, dim: int) -> int:
    return max(1, min(DECOY_MAX_ROWS, config.max_memory // (4 * 2 * 4 * max(1, dim))))


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
    cap = _decoy_cap(config, src.dim)
    fold_config = _fold_config(config, src.dim, cap)
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


def monolingual_decoys(src: Matrix, tgt: Matrix, config: MiningConfig) -> np.ndarray:
    """One-to-one pair scores of each side's two random halves mined against each other (the low
    end's decoys: no translations, best-neighbour pairs intact)."""
    rng = np.random.default_rng(config.seed + 1)
    cap = _decoy_cap(config, src.dim)
    fold_config = _fold_config(config, src.dim, cap)
    scores = []
    for side in (src, tgt):
        order = rng.permutation(len(side))
        a, b = order[: len(side) // 2], order[len(side) // 2 :]
        if len(a) == 0 or len(b) == 0:
            continue
        xa, xb = ArrayMatrix(side.take(_cap(a, cap, rng))), ArrayMatrix(side.take(_cap(b, cap, rng)))
        scores.append(mine_at(xa, xb, fold_config, float("-inf")).pairs.scores)
    return np.concatenate(scores or [np.zeros(0, np.float32)])


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
    mono = monolingual_decoys(src, tgt, config)
    fixed = DEFAULT_THRESHOLDS[config.margin]
    c = choose_threshold(one_to_one.scores, decoy_scores, config.target_precision, mono, fixed)
    recall = float(np.sum(hit_scores >= c.threshold) / planted) if planted else None
    cal = Calibration(
        threshold=c.threshold,
        target_precision=config.target_precision,
        precision_low=round(c.precision_low, 4),
        precision_high=round(c.precision_high, 4),
        precision_midpoint=round(c.precision, 4),
        recall=recall,
        kept=c.kept,
        reached=c.reached,
        small=c.small,
        fixed=c.fixed,
        one_to_one=len(one_to_one),
        decoy_pairs=len(decoy_scores),
        monolingual_decoy_pairs=len(mono),
        gold=planted,
        src_lang=config.src_lang,
        tgt_lang=config.tgt_lang,
    )
    logger.info("mining threshold %.4f (%s)", c.threshold, cal.describe())
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
