"""The threshold of ``babelspace score --threshold auto``: where the scores of a bitext's related rows
and of its unrelated rows are told apart, estimated against the same bitext shuffled.

The bitext's rows are a mixture: related rows (translations) and unrelated ones (misaligned rows,
junk). What unrelated rows score is measured on the bitext itself: each source paired with the
target of another row, by a random :func:`derangement` (no row keeps its own target). With ``n``
row scores ``s``, ``m`` null scores ``d`` and ``FAR(t)`` the share of ``d`` at or above ``t``:

- the share of unrelated rows ``π0`` is Storey's estimate, ``2 · #{s < median(d)} / n`` (related
  rows score above nearly every unrelated one);
- a threshold ``t`` keeping ``kept(t)`` rows expects ``false(t) = π0 · n · (#{d >= t} + 1) / (m + 1)``
  unrelated rows among them (the ``+1`` of finite-sample estimates: a small bitext cannot claim a
  precision its null is too small to show): estimated precision ``1 − false(t) / kept(t)`` and
  recall ``(kept(t) − false(t)) / ((1 − π0) · n)``;
- the score separates the two kinds by the AUC of related against unrelated rows,
  ``(AUC(s, d) − π0 / 2) / (1 − π0)`` (``AUC(s, d)``: Mann–Whitney of row against null scores).

Two rules pick ``t`` (:func:`score_threshold`):

1. **Default: where the two densities cross.** The density of related rows,
   ``f1 = (f − π0 · f0) / (1 − π0)``, against that of unrelated rows ``f0`` (both Gaussian kernel
   densities of the same bandwidth, Silverman's for the null, on a grid of :data:`GRID` points): the
   threshold maximises ``recall(t) − FAR(t)`` (Youden's J, whose derivative is ``f0(t) − f1(t)``), so
   it sits where ``f1`` rises above ``f0``, the point that drops as large a share of the unrelated rows
   as it keeps of the related ones whatever their mix. A filter asks exactly that: drop the junk,
   keep the rows. When the estimated AUC is below :data:`SEPARATES_AUC` a warning says the score
   cannot separate the two, by how much, and what is expected to pass at the threshold.
2. **``target_precision``: the loosest threshold whose estimated precision reaches it.**

Either way, a rule that finds nothing to keep (no threshold reaches the target precision; or no
related rows: ``(1 − π0) · n < 1``, or an estimated precision below :data:`MIN_PRECISION` at the
crossing) keeps nothing and says so (``reached: false``, one warning line); it never keeps rows far
below what it aims at.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

__all__ = [
    "GRID",
    "MIN_PRECISION",
    "SEPARATES_AUC",
    "ScoreThreshold",
    "derangement",
    "score_threshold",
]

logger = logging.getLogger(__name__)

#: The score separates related from unrelated rows when its estimated AUC is at least this.
SEPARATES_AUC = 0.98
#: The default rule keeps nothing where fewer than this share of the kept rows are estimated related.
MIN_PRECISION = 0.5
#: Points of the grid the two densities are compared on.
GRID = 2048


def derangement(n: int, seed: int) -> np.ndarray:
    """A uniformly random permutation of ``range(n)`` without a fixed point (``n >= 2``): uniform
    permutations drawn until one has none (about ``e`` draws on average)."""
    if n < 2:
        raise ValueError(f"a derangement needs n >= 2, got {n}")
    rng = np.random.default_rng(seed)
    idx = np.arange(n)
    while True:
        perm = rng.permutation(n)
        if not np.any(perm == idx):
            return perm


@dataclass(frozen=True)
class ScoreThreshold:
    """The threshold ``--threshold auto`` chose, and what is estimated for the rows it keeps."""

    rule: str  # "crossing" (the default) or "target_precision"
    threshold: float | None  # None: nothing kept
    target_precision: float | None
    reached: bool  # False: the rule found nothing to keep, and nothing is kept
    kept: int
    precision: float | None  # estimated, of the kept rows (None: nothing kept)
    recall: float | None  # estimated share of the related rows kept (None: no related rows)
    expected_false: float
    unrelated_share: float  # π0
    auc: float | None  # estimated AUC of related against unrelated rows (None: no related rows)
    separates: bool  # auc >= SEPARATES_AUC
    rows: int
    null_rows: int

    def describe(self) -> str:
        """One line: the rule, what it kept and the estimates."""
        if self.rule == "crossing":
            rule = "auto: where the densities of related and unrelated (shuffled) rows cross"
        else:
            rule = f"auto: target precision {100 * (self.target_precision or 0):.0f}%"
        if not self.reached:
            return f"{rule}; {self.why_nothing()}: nothing kept"
        recall = f"{100 * self.recall:.1f}%" if self.recall is not None else "—"
        auc = f"AUC {self.auc:.3f}" if self.auc is not None else "AUC —"
        return (
            f"{rule}; estimated precision {100 * (self.precision or 0):.1f}% and recall {recall} of the "
            f"{self.kept} kept rows ({self.expected_false:.1f} expected unrelated; "
            f"{100 * self.unrelated_share:.0f}% of the rows look unrelated; {auc})"
        )

    def why_nothing(self) -> str:
        if self.auc is None:
            return "no related rows found (the rows score as the shuffled ones do)"
        if self.rule == "target_precision":
            return f"no threshold reaches the target precision {100 * (self.target_precision or 0):.0f}%"
        return f"no threshold keeps rows estimated at least {100 * MIN_PRECISION:.0f}% related"

    def separation_note(self) -> str | None:
        """The warning when the score cannot separate the two kinds of rows (None when it can)."""
        if self.separates or self.auc is None:
            return None
        return (
            f"the score separates related from unrelated rows poorly: estimated AUC {self.auc:.3f}, "
            f"{SEPARATES_AUC - self.auc:.3f} below the {SEPARATES_AUC} at which it separates them"
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _survival(sorted_values: np.ndarray, t: np.ndarray) -> np.ndarray:
    """``#{v >= t}`` for each ``t``."""
    return len(sorted_values) - np.searchsorted(sorted_values, t, side="left")


def _auc(s: np.ndarray, d: np.ndarray) -> float:
    """P(a row score > a null score) + P(=) / 2 (Mann–Whitney), from sorted arrays."""
    below = np.searchsorted(d, s, side="left")
    at = np.searchsorted(d, s, side="right") - below
    return float((below.sum() + 0.5 * at.sum()) / (len(s) * len(d)))


def _smoothed_survival(values: np.ndarray, grid: np.ndarray, h: float) -> np.ndarray:
    """Share of ``values`` above each grid point, under a Gaussian kernel of bandwidth ``h``: the
    values binned on the grid, the bins convolved with the kernel, then summed from the top."""
    step = grid[1] - grid[0]
    counts = np.bincount(
        np.clip(np.rint((values - grid[0]) / step).astype(np.int64), 0, len(grid) - 1), minlength=len(grid)
    ).astype(np.float64)
    half = int(np.ceil(4 * h / step))
    x = np.arange(-half, half + 1) * step
    kernel = np.exp(-0.5 * (x / h) ** 2)
    density = np.convolve(counts, kernel / kernel.sum(), mode="same")
    return np.cumsum(density[::-1])[::-1] / max(1, len(values))


def _bandwidth(d: np.ndarray) -> float:
    """Silverman's rule on the null scores (never below a thousandth of their range)."""
    iqr = float(np.subtract(*np.quantile(d, [0.75, 0.25])))
    spread = min(float(np.std(d)), iqr / 1.34) or float(np.std(d)) or 1e-3
    return max(0.9 * spread * len(d) ** -0.2, 1e-3 * float(np.ptp(d) or 1.0))


def _crossing(s: np.ndarray, d: np.ndarray, pi0: float) -> float:
    """The grid point maximising the smoothed ``recall(t) − FAR(t)`` (rule 1 of the module docstring)."""
    h = _bandwidth(d)
    lo, hi = min(s[0], d[0]) - 4 * h, max(s[-1], d[-1]) + 4 * h
    grid = np.linspace(lo, hi, GRID)
    far = _smoothed_survival(d, grid, h)
    recall = (_smoothed_survival(s, grid, h) - pi0 * far) / (1.0 - pi0)
    j = recall - far
    best = np.flatnonzero(j >= j.max() - 1e-9)
    return float(grid[best[len(best) // 2]])


def score_threshold(
    scores: np.ndarray, null: np.ndarray, target_precision: float | None = None
) -> ScoreThreshold:
    """The threshold of ``--threshold auto`` over the candidate rows' ``scores`` against the ``null``
    (scores of the same rows shuffled): rule 1 of the module docstring, or rule 2 with a
    ``target_precision``. Nothing kept is ``threshold=None``."""
    s = np.sort(np.asarray(scores, dtype=np.float64))
    d = np.sort(np.asarray(null, dtype=np.float64))
    n, m = len(s), len(d)
    rule = "crossing" if target_precision is None else "target_precision"
    if n == 0 or m == 0:
        return ScoreThreshold(rule, None, target_precision, False, 0, None, None, 0.0, 1.0, None, False, n, m)
    pi0 = min(1.0, 2.0 * float(np.sum(s < np.median(d))) / n)
    related = (1.0 - pi0) * n
    auc = None
    if related >= 1:
        auc = float(np.clip((_auc(s, d) - 0.5 * pi0) / (1.0 - pi0), 0.0, 1.0))
    cand = s[::-1]  # every row score is a candidate threshold, highest first
    kept = _survival(s, cand)
    false = np.minimum(pi0 * n * (_survival(d, cand) + 1) / (m + 1), kept)
    precision = 1.0 - false / np.maximum(kept, 1)
    j: int | None = None
    if target_precision is not None:
        ok = np.flatnonzero(precision >= target_precision)
        j = int(ok[-1]) if len(ok) else None
    elif auc is not None:
        t = _crossing(s, d, pi0)
        above = np.flatnonzero(cand >= t)
        j = int(above[-1]) if len(above) else None
        if j is not None and precision[j] < MIN_PRECISION:
            j = None
    if j is None:
        out = ScoreThreshold(
            rule, None, target_precision, False, 0, None, 0.0 if auc is not None else None, 0.0,
            round(pi0, 4), None if auc is None else round(auc, 4), auc is not None and auc >= SEPARATES_AUC,
            n, m,
        )  # fmt: skip
        logger.warning("score --threshold auto: %s; nothing kept", out.why_nothing())
        return out
    out = ScoreThreshold(
        rule=rule,
        threshold=float(cand[j]),
        target_precision=target_precision,
        reached=True,
        kept=int(kept[j]),
        precision=round(float(precision[j]), 4),
        recall=None if related < 1 else round(float(min(1.0, (kept[j] - false[j]) / related)), 4),
        expected_false=round(float(false[j]), 2),
        unrelated_share=round(pi0, 4),
        auc=None if auc is None else round(auc, 4),
        separates=auc is not None and auc >= SEPARATES_AUC,
        rows=n,
        null_rows=m,
    )
    note = out.separation_note()
    if note:
        logger.warning(
            "%s: at the threshold %.4f an estimated %.1f of the %d kept rows are unrelated",
            note,
            out.threshold,
            out.expected_false,
            out.kept,
        )
    return out
