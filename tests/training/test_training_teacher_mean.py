"""The teacher mean (centring of the targets, added back at export) follows the ``--data`` mix."""

from __future__ import annotations

import numpy as np
import pytest

from babelspace.data.indexed_pairs import IndexedCorpus
from babelspace.data.pairs import ParallelPair
from babelspace.training.config import TrainConfig
from babelspace.training.setup.phases import fit_sample, teacher_mean


class _Cache:
    """Teacher vectors by text prefix: verses (v), UI strings (s) and names (n) on their own axis."""

    def lookup(self, texts: list[str]) -> np.ndarray:
        axis = {"v": 0, "s": 1, "n": 2}
        return np.stack([np.eye(3, dtype=np.float32)[axis[t[0]]] for t in texts])


def test_mean_follows_the_mix_shares_not_the_largest_source() -> None:
    verses = [ParallelPair(f"v{i}", f"w{i}", "en", "de", f"bible:x:Gen:1:{i}") for i in range(3000)]
    strings = [ParallelPair(f"s{i}", f"s{i}", "en", "en", f"mono-en:pymsg:m:{i}") for i in range(100)]
    train = IndexedCorpus.from_pairs("train", verses + strings)
    mix = TrainConfig(data=["bible:1", "mono-en:pymsg:0.5"], projection_fit_pairs=90)
    mean = teacher_mean(_Cache(), fit_sample(train, mix))
    np.testing.assert_allclose(mean, [2 / 3, 1 / 3, 0], atol=1e-6)  # 60 verses, 30 strings


def test_mean_counts_a_pair_per_language() -> None:
    """An English name paired with three languages weighs three pairs, as in the batches."""
    pairs = [
        ParallelPair("n1", x, "en", lang, "cldr:t:1") for x, lang in (("a", "de"), ("b", "fr"), ("c", "sw"))
    ]
    pairs.append(ParallelPair("v1", "w1", "en", "de", "bible:x:Gen:1:1"))
    assert teacher_mean(_Cache(), pairs) == pytest.approx(np.array([0.25, 0.0, 0.75]))
