"""The threshold step of mining: :func:`mine_embeddings` keeps the one-to-one candidates of
:func:`babelspace.mining.core.select_candidates` above a fixed threshold or, with ``auto``, above the
threshold calibrated for a target precision (:func:`babelspace.mining.calibration.calibrate`); known
parallel pairs for the calibration's recall estimate; the warning for a threshold that keeps almost nothing.

:func:`bible_dev_pairs` gives the verse pairs of the Bible *development* books (Esther, Galatians,
Philemon; never the held-out test books) that ``--threshold auto --check-recall`` plants into its decoy
corpora to estimate recall (:mod:`babelspace.mining.calibration`). :func:`planted_bible_dev` is a
planted corpus of those verses (aligned gold and unpaired noise on each side).
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from typing import Any

import numpy as np

from babelspace.errors import BabelspaceError
from babelspace.mining.calibration import calibrate
from babelspace.mining.core import MiningConfig, MiningResult, select_candidates
from babelspace.mining.decoys import run_k
from babelspace.vectors.shards import Matrix

logger = logging.getLogger(__name__)

#: Below this share of one-to-one candidates kept, a run warns that the threshold may not fit.
TINY_SHARE = 0.05


def planted_bible_dev(
    src_lang: str, tgt_lang: str, seed: int = 0
) -> tuple[list[str], list[str], list[tuple[int, int]]]:
    """Source and target verses of the Bible dev books with known pairs: the aligned verses are
    split in three; the first third stays parallel (gold), the second third only on the source
    side and the last third only on the target side (noise without counterpart). Shuffled."""
    pairs = bible_dev_pairs(src_lang, tgt_lang)
    if pairs is None:
        from babelspace.data.bible import bible_languages

        raise BabelspaceError(f"{src_lang}-{tgt_lang}: the Bible has {', '.join(bible_languages())}")
    src_v, tgt_v = pairs
    keys = list(range(len(src_v)))
    third = len(keys) // 3
    gold_keys, src_only, tgt_only = keys[:third], keys[third : 2 * third], keys[2 * third : 3 * third]
    rng = np.random.default_rng(seed)
    src_keys = [k for k in rng.permutation(len(gold_keys) + len(src_only))]
    tgt_keys = [k for k in rng.permutation(len(gold_keys) + len(tgt_only))]
    src_all, tgt_all = gold_keys + src_only, gold_keys + tgt_only
    src = [src_v[src_all[i]] for i in src_keys]
    tgt = [tgt_v[tgt_all[i]] for i in tgt_keys]
    src_pos = {int(i): p for p, i in enumerate(src_keys)}
    tgt_pos = {int(i): p for p, i in enumerate(tgt_keys)}
    gold = [(src_pos[g], tgt_pos[g]) for g in range(len(gold_keys))]
    return src, tgt, gold


def bible_dev_pairs(src_lang: str, tgt_lang: str) -> tuple[list[str], list[str]] | None:
    """Aligned verses of the Bible dev books in both languages (each text at most once per side), or
    None when the Bible lacks one of the languages."""
    from babelspace.data.bible import bible_languages, bible_verses

    langs = bible_languages()
    if src_lang not in langs or tgt_lang not in langs:
        return None
    src_v, tgt_v = bible_verses(src_lang, "dev"), bible_verses(tgt_lang, "dev")
    src, tgt, seen_s, seen_t = [], [], set(), set()
    for key in sorted(set(src_v) & set(tgt_v)):
        if src_v[key] not in seen_s and tgt_v[key] not in seen_t:
            src.append(src_v[key])
            tgt.append(tgt_v[key])
            seen_s.add(src_v[key])
            seen_t.add(tgt_v[key])
    return src, tgt


def gold_vectors(
    encoder: Any, src_lang: str | None, tgt_lang: str | None, batch_size: int = 64
) -> tuple[np.ndarray, np.ndarray] | None:
    """L2-normalised vectors of :func:`bible_dev_pairs` (row i of each is a pair), or None (with a
    log line) when no language pair is given or the Bible lacks one of its languages."""
    if not (src_lang and tgt_lang):
        return None
    pairs = bible_dev_pairs(src_lang, tgt_lang)
    if pairs is None:
        logger.warning(
            "the Bible has no %s-%s verses: --threshold auto calibrates precision without known pairs and "
            "does not estimate recall",
            src_lang,
            tgt_lang,
        )
        return None
    from babelspace.models.encoder import encode

    s = encode(encoder, pairs[0], batch_size=batch_size, show_progress=False, normalize=True)
    t = encode(encoder, pairs[1], batch_size=batch_size, show_progress=False, normalize=True)
    return np.asarray(s, dtype=np.float32), np.asarray(t, dtype=np.float32)


def warn_if_tiny_share(kept: int, one_to_one: int, threshold: float) -> float:
    """Share of one-to-one candidates kept; warns when it is below :data:`TINY_SHARE`."""
    share = kept / one_to_one if one_to_one else 0.0
    if one_to_one >= 20 and share < TINY_SHARE:
        logger.warning(
            "threshold %.4g keeps %d of %d one-to-one candidates (%.1f%%): it may not fit this model's "
            "score scale; try --threshold auto (the default; docs/mining.md)",
            threshold,
            kept,
            one_to_one,
            100 * share,
        )
    return share


def mine_embeddings(
    src: Matrix,
    tgt: Matrix,
    config: MiningConfig | None = None,
    gold: tuple[np.ndarray, np.ndarray] | None = None,
) -> MiningResult:
    """Mine one-to-one pairs between two L2-normalised embedding matrices.

    With ``threshold="auto"`` the threshold is calibrated on these matrices
    (:func:`babelspace.mining.calibration.calibrate`); ``gold``: vectors of known pairs (row i of each)
    planted into its decoys to estimate recall. A number is used as given.
    """
    config = config or MiningConfig()
    auto = config.threshold == "auto"
    if auto:  # the run and its decoys share one neighbourhood size (one warning when it is clipped)
        k = run_k(config.k, len(src), len(tgt))
        if k < config.k:
            logger.warning(
                "--k %d is larger than this corpus allows (%d source, %d target sentences; its decoys "
                "search halves of them): the run and its decoys use k=%d",
                config.k,
                len(src),
                len(tgt),
                k,
            )
        config = replace(config, k=k)
    sel = select_candidates(src, tgt, config, mutual=auto, warn_k=not auto)
    calibration = None
    if auto:
        t0 = time.perf_counter()
        calibration = calibrate(src, tgt, sel.one_to_one, sel.mutual, config, gold)
        sel.timings["calibrate_s"] = time.perf_counter() - t0
        threshold = calibration.threshold
    else:
        threshold = float(config.threshold)  # type: ignore[arg-type]
    one = sel.one_to_one
    accepted = one.subset(one.scores >= threshold)
    return MiningResult(
        accepted, sel.n_candidates, len(one), threshold, sel.plans, sel.timings, sel.k, calibration
    )
