"""``--threshold auto``: a margin threshold for a target precision (default 0.9), with the precision
of the kept pairs estimated on *this* run: a point estimate and the interval that bounds it.

A margin threshold belongs to an embedding space and a corpus: LASER's 1.06 (Artetxe & Schwenk 2019,
§4.2) fits LASER, and a threshold tuned on planted Bible verses does not carry its precision to other
text or to another share of true pairs. So the threshold is calibrated on the user's own sentences by
target-decoy estimation of false discoveries (Elias & Gygi 2007), with the two decoys of
:mod:`babelspace.mining.decoys`: cross-lingual decoys, whose scores run too low (they lose the
strongest false pairs with the true ones), and monolingual ones, whose scores run too high
(paraphrases within one language).

1. **The point estimate.** The null, what false pairs of this run score, is the *midpoint of the two
   decoys' score distributions*: at every quantile, halfway between the cross-lingual and the
   monolingual decoy score. At a threshold ``t`` keeping ``kept(t)`` of the run's ``N`` one-to-one
   pairs, the false pairs expected are ``N0 · FAR(t)``, with ``FAR(t)`` the share of null scores
   ``>= t`` and ``N0`` the pairs that look unrelated (Storey's estimate: twice those scoring below
   the null's median). Above the null's top :data:`TAIL_SHARE`, ``FAR(t)`` is at least what an
   exponential fitted to the excesses there gives (peaks over threshold), so that a score above every
   decoy is not taken for one no false pair reaches. The estimate is ``1 − N0 · FAR(t) / kept(t)``.
2. **The interval.** Its low end counts the monolingual decoys' false acceptance rate against every
   one-to-one pair, with the ``+1`` of finite-sample target-decoy estimates (a small corpus cannot
   claim a precision its decoys are too small to show); its high end counts the cross-lingual
   decoys' rate against the unrelated-looking pairs and takes the 5 % lower Poisson bound of that
   count (a run whose expected false pairs are few may well have none). The point is kept inside
   it. The report is a **point** (``precision_kind: "point"``) when both ends lie within
   :data:`POINT_HALF_WIDTH` of the estimate (and the run is not too small, point 3), and an
   **interval** otherwise.
3. The threshold is the lowest pair score at which the point estimate reaches the target, among the
   sets estimated to hold at least :data:`MIN_SUPPORT` more true than false pairs. When none does, the
   best-supported set is kept (:func:`best_supported`: down to where true pairs stop being estimated to
   outnumber false ones), said in one warning line; nothing only when no set has that support. A run
   too small for its decoys (fewer than :data:`MIN_DECOY_PAIRS` cross-lingual decoy pairs, pooled over
   the splits) is said to be uncertain at this size, and its support is counted at the interval's low
   end. The run and its decoys share one neighbourhood size (:func:`babelspace.mining.decoys.run_k`).
4. With ``--check-recall`` and a language pair the Bible has, known parallel verses of the Bible
   *development* books are planted into each cross-lingual fold; the share of them mined correctly at
   ``>= t`` estimates the recall.

Measured on planted pairs over registers, shares, sizes, languages and two models, with a held-out
part: docs/mining.md (``bench/mining_threshold.py``).
"""

from __future__ import annotations

import logging
import math
from dataclasses import asdict, dataclass
from statistics import NormalDist
from typing import Any

import numpy as np

from babelspace.mining.core import MiningConfig
from babelspace.mining.decoys import run_decoys
from babelspace.retrieval.knn import Candidates
from babelspace.vectors.shards import Matrix

logger = logging.getLogger(__name__)

#: Default ``--target-precision``.
TARGET_PRECISION = 0.9
#: Below this many cross-lingual decoy pairs (pooled over the splits), a run is too small for its estimate.
MIN_DECOY_PAIRS = 100
#: The report is a point (``precision_kind: "point"``) when the interval lies within this of it.
POINT_HALF_WIDTH = 0.10
#: One-sided level of the Poisson bound at the interval's high end.
INTERVAL_ALPHA = 0.05
#: The null's top share whose excesses the point estimate's exponential tail is fitted to.
TAIL_SHARE = 0.1


@dataclass(frozen=True)
class Calibration:
    """The chosen threshold and what the calibration estimates for the run at it."""

    threshold: float
    target_precision: float
    precision_estimate: float  # the point estimate the threshold was chosen by
    precision_low: float  # the interval (monolingual decoys, +1)
    precision_high: float  # ... (cross-lingual decoys, their 5% Poisson lower bound of false pairs)
    precision_kind: str  # "point": the interval lies within POINT_HALF_WIDTH of the estimate; "interval"
    recall: float | None  # share of planted known pairs kept and right; None without known pairs
    kept: int
    reached: bool  # False: no threshold reaches the target
    small: bool  # too few decoy pairs: the estimate is uncertain at this size
    one_to_one: int
    decoy_pairs: int
    monolingual_decoy_pairs: int
    splits: int  # random splits the decoys were pooled over
    gold: int
    src_lang: str | None
    tgt_lang: str | None

    def describe(self) -> str:
        recall = (
            f"recall {100 * self.recall:.1f}% of {self.gold} planted Bible dev "
            f"{self.src_lang}-{self.tgt_lang} pairs"
            if self.recall is not None
            else "recall not estimated (--check-recall with a --src-lang/--tgt-lang pair of the Bible estimates it)"
        )
        note = (
            ""
            if self.reached
            else " (not reached: the best-supported set is kept)"
            if self.kept
            else " (not reached)"
        )
        bounds = f"[{100 * self.precision_low:.1f}%, {100 * self.precision_high:.1f}%]"
        how = (
            f"a point estimate, within ±{100 * POINT_HALF_WIDTH:.0f} points: the interval is {bounds}"
            if self.precision_kind == "point"
            else f"an interval estimate: {bounds} bounds it, more widely than ±{100 * POINT_HALF_WIDTH:.0f} points"
        )
        size = "; uncertain at this size" if self.small else ""
        return (
            f"auto: target precision {100 * self.target_precision:.0f}%{note}; precision of the {self.kept} kept "
            f"pairs estimated at {100 * self.precision_estimate:.1f}% ({how}; from {self.decoy_pairs} "
            f"cross-lingual and {self.monolingual_decoy_pairs} monolingual decoy pairs, {self.splits} "
            f"split(s){size}), {recall}"
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _at_or_above(sorted_values: np.ndarray, t: np.ndarray) -> np.ndarray:
    return len(sorted_values) - np.searchsorted(sorted_values, t, side="left")


def midpoint_null(decoy_scores: np.ndarray, monolingual_scores: np.ndarray | None) -> np.ndarray:
    """Sorted scores of the null: at every quantile the mean of the two decoys' scores (the
    cross-lingual decoys alone without monolingual ones)."""
    d = np.sort(np.asarray(decoy_scores, dtype=np.float64))
    if monolingual_scores is None or not len(monolingual_scores) or not len(d):
        return d
    mono = np.asarray(monolingual_scores, dtype=np.float64)
    q = (np.arange(max(len(d), len(mono))) + 0.5) / max(len(d), len(mono))
    return np.sort((np.quantile(d, q) + np.quantile(mono, q)) / 2)


def null_far(null: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Share of the (sorted) ``null`` at or above each ``t``; above its top :data:`TAIL_SHARE` at least
    what an exponential fitted to the excesses over that quantile (mean excess as its scale) gives."""
    if not len(null):
        return np.zeros(len(t))
    empirical = _at_or_above(null, t) / len(null)
    u = float(np.quantile(null, 1.0 - TAIL_SHARE))
    excess = null[null > u] - u
    if not len(excess) or excess.mean() <= 0:
        return empirical
    tail = len(excess) / len(null) * np.exp(-(t - u) / excess.mean())
    return np.where(t > u, np.maximum(empirical, tail), empirical)


def _unrelated(sorted_scores: np.ndarray, null: np.ndarray) -> int:
    """Storey's estimate of the pairs that look unrelated: twice those below the null's median."""
    if not len(null):
        return len(sorted_scores)
    return min(len(sorted_scores), 2 * int(np.sum(sorted_scores < np.median(null))))


def poisson_lower(mean: np.ndarray, alpha: float) -> np.ndarray:
    """The ``alpha`` quantile of Poisson counts of each ``mean``: the smallest ``k`` with
    ``P(X <= k) >= alpha`` (summed exactly up to a mean of 100, the normal approximation above)."""
    mean = np.asarray(mean, dtype=np.float64)
    out = np.zeros(mean.shape)
    big = mean > 100
    out[big] = np.maximum(0.0, np.floor(mean[big] + NormalDist().inv_cdf(alpha) * np.sqrt(mean[big])))
    m = mean[~big & (mean > 0)]
    log_pmf, cdf, k = -m, np.exp(-m), np.zeros(m.shape)
    for i in range(1, 200):
        below = cdf < alpha
        if not below.any():
            break
        k[below] = i
        log_pmf = log_pmf + np.log(np.maximum(m, 1e-300)) - math.log(i)
        cdf = cdf + np.exp(log_pmf)
    out[~big & (mean > 0)] = k
    return out


@dataclass(frozen=True)
class Estimate:
    """Per candidate threshold (the run's one-to-one scores, descending): pairs kept and the false
    pairs the point estimate and each end of the interval expect."""

    thresholds: np.ndarray
    kept: np.ndarray
    false_point: np.ndarray  # against the midpoint null
    false_high: np.ndarray  # monolingual decoys (+1): the low end of the precision
    false_low: np.ndarray  # cross-lingual decoys (Poisson lower bound): the high end

    def _precision(self, false: np.ndarray) -> np.ndarray:
        return np.clip(1.0 - false / np.maximum(self.kept, 1), 0.0, 1.0)

    @property
    def precision_low(self) -> np.ndarray:
        return self._precision(self.false_high)

    @property
    def precision_high(self) -> np.ndarray:
        return np.maximum(self._precision(self.false_low), self.precision_low)

    @property
    def precision(self) -> np.ndarray:
        """The point estimate, inside the interval."""
        return np.clip(self._precision(self.false_point), self.precision_low, self.precision_high)


def estimate_precision(
    scores: np.ndarray, decoy_scores: np.ndarray, monolingual_scores: np.ndarray | None = None
) -> Estimate:
    """The estimates at every score of ``scores`` (the run's one-to-one pairs): false pairs
    ``N0 · FAR(t)`` against the :func:`midpoint_null` (:func:`null_far`), the 5 %
    Poisson lower bound of ``N0' · D(t) / n`` from the cross-lingual decoys and ``N · (M(t) + 1) /
    (m + 1)`` from the monolingual ones (``N0``, ``N0'``: Storey's unrelated pairs against each null;
    without monolingual decoys the cross-lingual ones stand in for them)."""
    t = np.sort(np.asarray(scores, dtype=np.float64))[::-1]
    d = np.sort(np.asarray(decoy_scores, dtype=np.float64))
    mono = d if monolingual_scores is None else np.sort(np.asarray(monolingual_scores, dtype=np.float64))
    null = midpoint_null(d, None if monolingual_scores is None else mono)
    kept = len(t) - np.searchsorted(t[::-1], t, side="left")
    point = _unrelated(t[::-1], null) * null_far(null, t)
    low = poisson_lower(_unrelated(t[::-1], d) * _at_or_above(d, t) / max(1, len(d)), INTERVAL_ALPHA)
    high = len(t) * (_at_or_above(mono, t) + 1) / (len(mono) + 1)
    return Estimate(t, kept, np.minimum(point, kept), np.minimum(high, kept), np.minimum(low, kept))


@dataclass(frozen=True)
class Choice:
    """The threshold :func:`choose_threshold` picked and the estimate at it."""

    threshold: float
    precision: float  # the point estimate
    precision_low: float
    precision_high: float
    kept: int
    reached: bool
    small: bool

    @property
    def kind(self) -> str:
        """``"point"`` when the interval lies within :data:`POINT_HALF_WIDTH` of the estimate (and the
        run is not too small for its decoys), else ``"interval"``."""
        narrow = max(self.precision - self.precision_low, self.precision_high - self.precision)
        return "point" if self.kept and not self.small and narrow <= POINT_HALF_WIDTH + 1e-9 else "interval"


def _choice(est: Estimate, j: int, reached: bool, small: bool) -> Choice:
    return Choice(
        float(est.thresholds[j]),
        float(est.precision[j]),
        float(est.precision_low[j]),
        float(est.precision_high[j]),
        int(est.kept[j]),
        reached,
        small,
    )


def choose_threshold(
    scores: np.ndarray,
    decoy_scores: np.ndarray,
    target: float,
    monolingual_scores: np.ndarray | None = None,
    splits: int = 1,
) -> Choice:
    """The lowest score of ``scores`` whose point estimate reaches ``target`` (among the sets that
    :func:`best_supported` would accept: :data:`MIN_SUPPORT`); when none does, the best-supported
    set, with one warning saying which and its estimate. A run with fewer than :data:`MIN_DECOY_PAIRS`
    decoy pairs (pooled) is warned about (its estimate is uncertain at this size). When nothing is
    kept, a threshold above every score."""
    est = estimate_precision(scores, decoy_scores, monolingual_scores)
    small = len(decoy_scores) < MIN_DECOY_PAIRS  # pooled over the splits
    if not len(est.thresholds):
        return Choice(float("inf"), 0.0, 0.0, 0.0, 0, False, small)
    supported = _support(est, small) >= MIN_SUPPORT
    ok = np.nonzero((est.precision >= target) & supported)[0]
    size = (
        f" (uncertain at this size: {len(est.thresholds)} one-to-one pairs, {len(decoy_scores)} decoy pairs)"
        if small
        else ""
    )
    if len(ok):
        j = int(ok[-1])
        if small:
            logger.warning(
                "the precision estimate is uncertain at this size%s: keeping the %d pairs scoring >= %.4f, "
                "estimated precision %.1f%% [%.1f%%, %.1f%%]; check a sample of the pairs, or give --threshold T",
                size, est.kept[j], est.thresholds[j], 100 * est.precision[j], 100 * est.precision_low[j],
                100 * est.precision_high[j],
            )  # fmt: skip
        return _choice(est, j, True, small)
    j = best_supported(est, small)
    best = int(np.argmax(est.precision))
    reach = (
        f"no threshold reaches the target precision {target:.2f} on this run{size} (at best an estimate of "
        f"{est.precision[best]:.2f}, keeping {est.kept[best]} pairs at {est.thresholds[best]:.4f})"
    )
    if j is None:
        logger.warning(
            "%s and no set of pairs is estimated to hold %g more true than false pairs%s: nothing is kept. "
            "Lower --target-precision, give --threshold T, or use a model that pairs these languages",
            reach,
            MIN_SUPPORT,
            " at the low end of its interval" if small else "",
        )
        return _nothing(est, small)
    logger.warning(
        "%s: keeping the best-supported set, the %d pairs scoring >= %.4f (where true pairs are estimated to "
        "outnumber false ones), estimated precision %.1f%% [%.1f%%, %.1f%%]; give --threshold T or "
        "--target-precision P to choose otherwise",
        reach, est.kept[j], est.thresholds[j], 100 * est.precision[j], 100 * est.precision_low[j],
        100 * est.precision_high[j],
    )  # fmt: skip
    return _choice(est, j, False, small)


#: The best-supported set must be estimated to hold at least this many more true than false pairs.
MIN_SUPPORT = 2.0


def _support(est: Estimate, small: bool) -> np.ndarray:
    """Estimated true pairs beyond false ones at every threshold: ``kept · (2 · precision − 1)``, with
    the interval's low end as the precision of a run too small for its decoys (its point estimate
    rests on a few dozen decoy pairs)."""
    return est.kept * (2.0 * (est.precision_low if small else est.precision) - 1.0)


def best_supported(est: Estimate, small: bool = False) -> int | None:
    """Index of the threshold that keeps the most estimated true pairs beyond false ones
    (``kept · (2 · precision − 1)``): the pairs kept are those scoring where true pairs are estimated
    to be denser than false ones (the cut where the two estimated densities cross). None when no
    threshold's margin reaches :data:`MIN_SUPPORT` pairs."""
    net = _support(est, small)
    j = int(np.nonzero(net == net.max())[0][-1])
    return j if net[j] >= MIN_SUPPORT else None


def _nothing(est: Estimate, small: bool) -> Choice:
    above = np.nextafter(np.float32(est.thresholds[0]), np.float32(np.inf))  # above every float32 score
    return Choice(float(above), 0.0, 0.0, 0.0, 0, False, small)


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
    dec = run_decoys(src, tgt, mutual, config, gold)
    c = choose_threshold(one_to_one.scores, dec.cross, config.target_precision, dec.mono, dec.splits)
    recall = float(np.sum(dec.hits >= c.threshold) / dec.planted) if dec.planted else None
    cal = Calibration(
        threshold=c.threshold,
        target_precision=config.target_precision,
        precision_estimate=round(c.precision, 4),
        precision_low=round(c.precision_low, 4),
        precision_high=round(c.precision_high, 4),
        precision_kind=c.kind,
        recall=recall,
        kept=c.kept,
        reached=c.reached,
        small=c.small,
        one_to_one=len(one_to_one),
        decoy_pairs=len(dec.cross),
        monolingual_decoy_pairs=len(dec.mono),
        splits=dec.splits,
        gold=dec.planted,
        src_lang=config.src_lang,
        tgt_lang=config.tgt_lang,
    )
    logger.info("mining threshold %.4f (%s)", c.threshold, cal.describe())
    return cal
