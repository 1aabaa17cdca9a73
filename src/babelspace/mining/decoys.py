"""The decoy corpora of ``--threshold auto``: the run's own vectors mined again where (nearly) no
translation is left, so that what they score is what false pairs score on this run.

Two kinds, which err in opposite directions (:mod:`babelspace.mining.calibration` combines them):

- **Cross-lingual** (:func:`cross_lingual_decoys`): the sources are split in two random folds and each
  fold is mined against every target *except the mutual partners of its own sources* (a translation
  present in the corpora is almost always a mutual pair). This also removes the strongest *false*
  pairs (unrelated sentences that are each other's best), so its scores run too low: measured on
  planted pairs, a decoy that removes only the true partners scores like the run's false pairs, and
  this one's tail is shorter.
- **Monolingual** (:func:`monolingual_decoys`): each side is split in two random halves mined against
  each other: no translations and the best-neighbour structure intact, but paraphrases and
  near-repeats within one language score higher than unrelated text across languages, so its
  scores run too high.

Each fold is searched with the run's ``k`` (:func:`run_k`: the same for the run and its folds, so
that a fold's smaller neighbourhood does not score its pairs differently), margin and retrieval, at most :data:`DECOY_MAX_ROWS` rows a
side. A small run repeats both over several random splits (:func:`decoy_splits`) and pools them, so
that the tail of the decoy scores, which a precise threshold reads, rests on more pairs. Known parallel
pairs (``gold``: vectors of Bible dev verses) planted into each cross-lingual fold, a tenth of its size,
give the recall estimate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from babelspace.mining.core import MiningConfig, mine_at
from babelspace.retrieval.knn import Candidates
from babelspace.vectors.shards import ArrayMatrix, Matrix

#: Rows of each side of a decoy fold at most (a random subset beyond; the margin's normalisation by
#: the neighbourhood keeps false scores nearly independent of the corpus size). Fewer when the fold's
#: vectors would take more than a quarter of ``--max-memory``; its search gets the rest of the budget.
DECOY_MAX_ROWS = 20_000
#: Known pairs planted into a cross-lingual fold, as a share of its sources.
GOLD_SHARE = 0.1
#: Random splits a run's decoys are pooled over at most (small runs; see :func:`decoy_splits`).
MAX_SPLITS = 3
#: Sources below which a run gets more than one split: ``ceil(SPLIT_ROWS / sources)``, at most
#: :data:`MAX_SPLITS`.
SPLIT_ROWS = 1500


@dataclass(frozen=True)
class Decoys:
    """Pooled decoy scores of a run and the planted known pairs mined right."""

    cross: np.ndarray  # one-to-one pair scores of the cross-lingual decoy searches
    mono: np.ndarray  # ... of the monolingual ones
    hits: np.ndarray  # scores of planted known pairs mined right (source and target of one pair)
    planted: int
    splits: int


def run_k(k: int, n_src: int, n_tgt: int) -> int:
    """The neighbourhood size a calibrated run and its decoys share: ``k``, or less when a decoy fold
    (half a side) holds fewer sentences, so that the run's margins and its decoys' margins are taken
    over neighbourhoods of the same size (a floored small neighbourhood scores lower)."""
    return max(1, min(k, n_src // 2, n_tgt // 2))


def decoy_splits(n_src: int) -> int:
    """How many random splits a run with ``n_src`` sources pools its decoys over."""
    return max(1, min(MAX_SPLITS, math.ceil(SPLIT_ROWS / max(1, n_src))))


def run_decoys(
    src: Matrix,
    tgt: Matrix,
    mutual: Candidates,
    config: MiningConfig,
    gold: tuple[np.ndarray, np.ndarray] | None = None,
) -> Decoys:
    """Both kinds of decoys over :func:`decoy_splits` random splits (split ``r`` seeded by
    ``config.seed + 2r`` and ``+ 2r + 1``)."""
    splits = decoy_splits(len(src))
    cross, mono, hits, planted = [], [], [], 0
    for r in range(splits):
        c, h, p = cross_lingual_decoys(src, tgt, mutual, config, gold, seed=config.seed + 2 * r)
        cross.append(c)
        hits.append(h)
        planted += p
        mono.append(monolingual_decoys(src, tgt, config, seed=config.seed + 2 * r + 1))
    return Decoys(np.concatenate(cross), np.concatenate(mono), np.concatenate(hits), planted, splits)


def _fold_config(config: MiningConfig, dim: int, cap: int) -> MiningConfig:
    return replace(
        config,
        threshold=float("-inf"),
        check_recall=False,
        show_progress=False,
        max_memory=config.max_memory - 2 * 4 * dim * cap,
    )


def _decoy_cap(config: MiningConfig, dim: int) -> int:
    return max(1, min(DECOY_MAX_ROWS, config.max_memory // (4 * 2 * 4 * max(1, dim))))


def _cap(ids: np.ndarray, cap: int, rng: np.random.Generator) -> np.ndarray:
    """At most ``cap`` of ``ids`` (a random subset), sorted."""
    if len(ids) > cap:
        ids = rng.choice(ids, cap, replace=False)
    return np.sort(ids)


def cross_lingual_decoys(
    src: Matrix,
    tgt: Matrix,
    mutual: Candidates,
    config: MiningConfig,
    gold: tuple[np.ndarray, np.ndarray] | None = None,
    seed: int = 0,
) -> tuple[np.ndarray, np.ndarray, int]:
    """(decoy pair scores, scores of planted pairs mined right, planted pairs): each of two random
    source folds mined against the targets that are not its sources' mutual partners, with half of
    ``gold`` (known pair vectors, row i of each a pair) planted into each."""
    rng = np.random.default_rng(seed)
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
        p = mine_at(ArrayMatrix(xs), ArrayMatrix(xt), fold_config, float("-inf"), warn_k=False).pairs
        decoys.append(p.scores[(p.src < us) & (p.tgt < ut)])
        hits.append(p.scores[(p.src >= us) & (p.src - us == p.tgt - ut)])
        planted += len(g)
    empty = np.zeros(0, np.float32)
    return np.concatenate(decoys or [empty]), np.concatenate(hits or [empty]), planted


def monolingual_decoys(src: Matrix, tgt: Matrix, config: MiningConfig, seed: int = 1) -> np.ndarray:
    """One-to-one pair scores of each side's two random halves mined against each other (no
    translations, best-neighbour pairs intact)."""
    rng = np.random.default_rng(seed)
    cap = _decoy_cap(config, src.dim)
    fold_config = _fold_config(config, src.dim, cap)
    scores = []
    for side in (src, tgt):
        order = rng.permutation(len(side))
        a, b = order[: len(side) // 2], order[len(side) // 2 :]
        if len(a) == 0 or len(b) == 0:
            continue
        xa, xb = ArrayMatrix(side.take(_cap(a, cap, rng))), ArrayMatrix(side.take(_cap(b, cap, rng)))
        scores.append(mine_at(xa, xb, fold_config, float("-inf"), warn_k=False).pairs.scores)
    return np.concatenate(scores or [np.zeros(0, np.float32)])
