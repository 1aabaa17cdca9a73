"""``--threshold auto``: a mining threshold fitted to the model instead of LASER's 1.06.

A margin threshold is a property of an embedding space: LASER's 1.06 (Artetxe & Schwenk 2019,
§4.2; WikiMatrix) fits LASER, while e5-small puts true pairs at ratio margins of 1.01–1.09. The
auto threshold is calibrated the way BUCC tunes its threshold on the training split (Zweigenbaum
et al. 2017; Artetxe & Schwenk 2019, §4.1): with the *same* model, ``k``, margin and retrieval,
mine a planted corpus of known-parallel Bible development verses (books Esther, Galatians,
Philemon; never the held-out test books) of the same language pair, in which each side also holds
as many unrelated verses without a counterpart, and take the threshold that maximises F1 against
the known pairs (:func:`babelspace.metrics.bucc.tune_threshold`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from babelspace.errors import BabelspaceError
from babelspace.metrics.bucc import tune_threshold
from babelspace.mining.core import MiningConfig, mine_embeddings
from babelspace.mining.shards import ArrayMatrix

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

logger = logging.getLogger(__name__)

#: Below this share of one-to-one candidates kept, a run warns that the threshold may not fit.
TINY_SHARE = 0.05
#: Below this calibration F1 (percent), the model does not pair this language pair reliably.
WEAK_F1 = 50.0


@dataclass(frozen=True)
class Calibration:
    threshold: float
    precision: float  # percent, as babelspace.metrics.bucc.tune_threshold reports
    recall: float
    f1: float
    gold: int
    noise_per_side: int
    src_lang: str
    tgt_lang: str

    def describe(self) -> str:
        return (
            f"auto: F1-optimal on Bible dev {self.src_lang}-{self.tgt_lang} ({self.gold} known pairs + "
            f"{self.noise_per_side} unrelated verses per side; P {self.precision:.1f}% R {self.recall:.1f}% "
            f"F1 {self.f1:.1f}%)"
        )


def planted_bible_dev(
    src_lang: str, tgt_lang: str, seed: int = 0
) -> tuple[list[str], list[str], list[tuple[int, int]]]:
    """Source and target verses of the Bible dev books with known pairs: the aligned verses are
    split in three; the first third stays parallel (gold), the second third only on the source
    side and the last third only on the target side (noise without counterpart). Shuffled."""
    from babelspace.data.bible import bible_languages, bible_verses

    langs = bible_languages()
    for lang, flag in ((src_lang, "--src-lang"), (tgt_lang, "--tgt-lang")):
        if lang not in langs:
            raise BabelspaceError(
                f"{flag} {lang!r}: --threshold auto calibrates on the Bible, which has {', '.join(langs)}"
            )
    src_v, tgt_v = bible_verses(src_lang, "dev"), bible_verses(tgt_lang, "dev")
    keys, seen_s, seen_t = [], set(), set()
    for key in sorted(set(src_v) & set(tgt_v)):
        if src_v[key] not in seen_s and tgt_v[key] not in seen_t:
            keys.append(key)
            seen_s.add(src_v[key])
            seen_t.add(tgt_v[key])
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


def calibrate_threshold(
    encoder: SentenceTransformer, src_lang: str, tgt_lang: str, config: MiningConfig, batch_size: int = 64
) -> Calibration:
    """The F1-optimal threshold of ``encoder`` under ``config`` (a :class:`MiningConfig`) on
    :func:`planted_bible_dev` of the language pair."""
    from babelspace.models.encoder import encode  # torch and sentence-transformers: load on use

    src, tgt, gold = planted_bible_dev(src_lang, tgt_lang)
    s = encode(encoder, src, batch_size=batch_size, show_progress=False, normalize=True)
    t = encode(encoder, tgt, batch_size=batch_size, show_progress=False, normalize=True)
    result = mine_embeddings(
        ArrayMatrix(s), ArrayMatrix(t), replace(config, threshold=float("-inf"), show_progress=False)
    )
    p = result.pairs
    threshold, precision, recall, f1 = tune_threshold(p, gold)
    cal = Calibration(threshold, precision, recall, f1, len(gold), len(src) - len(gold), src_lang, tgt_lang)
    logger.info("mining threshold %.4f (%s)", threshold, cal.describe())
    if f1 < WEAK_F1:
        logger.warning(
            "the model finds few of the known %s-%s pairs (F1 %.1f%% on the Bible dev calibration): expect "
            "mostly wrong mined pairs; use a model trained for this language pair",
            src_lang,
            tgt_lang,
            f1,
        )
    return cal


def warn_if_tiny_share(kept: int, one_to_one: int, threshold: float) -> float:
    """Share of one-to-one candidates kept; warns when it is below :data:`TINY_SHARE`."""
    share = kept / one_to_one if one_to_one else 0.0
    if one_to_one >= 20 and share < TINY_SHARE:
        logger.warning(
            "threshold %.4g keeps %d of %d one-to-one candidates (%.1f%%): it may not fit this model's "
            "score scale; try --threshold auto (docs/mining.md)",
            threshold,
            kept,
            one_to_one,
            100 * share,
        )
    return share
