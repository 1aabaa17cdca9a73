"""BalancedBatchSampler: balance per language pair, determinism, exact resume, length bucketing."""

from __future__ import annotations

import random
from collections import Counter

import numpy as np
import pytest

from babelspace.data import BalancedBatchSampler, ParallelPair


def make_pairs(sizes: dict[str, int], seed: int = 0) -> list[ParallelPair]:
    rng = random.Random(seed)
    pairs = []
    for lang, n in sizes.items():
        for i in range(n):
            src = "w" * rng.randint(1, 120)
            pairs.append(ParallelPair(src, f"{lang}{i}", "en", lang, f"mem:{lang}:{i}"))
    rng.shuffle(pairs)
    return pairs


SIZES = {"de": 2000, "fr": 200, "sw": 30}


@pytest.mark.parametrize("bucket", [False, True])
def test_balanced_batches_have_equal_counts_per_pair(bucket):
    pairs = make_pairs(SIZES)
    sampler = BalancedBatchSampler(pairs, batch_size=12, seed=3, bucket_by_length=bucket)
    batches = list(sampler)
    assert len(batches) == len(sampler) == len(pairs) // 12
    for batch in batches:
        assert len(batch) == 12 and len(set(batch)) == 12
        assert Counter(pairs[i].tgt_lang for i in batch) == {"de": 4, "fr": 4, "sw": 4}
    # The small group is recycled (each of its 30 pairs seen many times), the big one walked through.
    seen = Counter(i for b in batches for i in b)
    sw = [i for i, p in enumerate(pairs) if p.tgt_lang == "sw"]
    assert all(seen[i] >= 6 for i in sw)
    de_seen = [seen[i] for i, p in enumerate(pairs) if p.tgt_lang == "de"]
    assert max(de_seen) == 1


def test_uneven_batch_size_rotates_the_extra_places():
    pairs = make_pairs(SIZES)
    sampler = BalancedBatchSampler(pairs, batch_size=7, seed=0)
    totals = Counter(pairs[i].tgt_lang for b in sampler for i in b)
    n = len(pairs) // 7 * 7
    assert set(totals) == {"de", "fr", "sw"}
    assert max(totals.values()) - min(totals.values()) <= 1 and sum(totals.values()) == n


def test_proportional_mode_follows_the_data():
    pairs = make_pairs(SIZES)
    batches = list(BalancedBatchSampler(pairs, batch_size=10, mode="proportional", seed=0))
    flat = [i for b in batches for i in b]
    assert len(flat) == len(set(flat)) == len(pairs) // 10 * 10  # one pass, no repeats
    share = Counter(pairs[i].tgt_lang for i in flat)["de"] / len(flat)
    assert share == pytest.approx(2000 / 2230, abs=0.01)


def test_seeded_and_epochs_differ():
    pairs = make_pairs(SIZES)
    a = BalancedBatchSampler(pairs, batch_size=6, seed=5)
    b = BalancedBatchSampler(pairs, batch_size=6, seed=5)
    assert list(a) == list(b)
    assert a.epoch == 1  # finishing an epoch moves on to the next
    assert list(a) != list(BalancedBatchSampler(pairs, batch_size=6, seed=5))
    assert list(BalancedBatchSampler(pairs, batch_size=6, seed=6)) != list(b)
    b.set_epoch(1)
    assert b.epoch_batches(1) == list(b)


@pytest.mark.parametrize(
    ("mode", "bucket"), [("balanced", False), ("balanced", True), ("proportional", True)]
)
def test_resume_gives_the_same_batches(mode, bucket):
    pairs = make_pairs(SIZES)
    kwargs = dict(batch_size=9, mode=mode, bucket_by_length=bucket, seed=11, infinite=True)
    total = 2 * (len(pairs) // 9) + 17  # crosses two epoch boundaries
    reference_it = iter(BalancedBatchSampler(pairs, **kwargs))
    reference = [next(reference_it) for _ in range(total)]

    first = BalancedBatchSampler(pairs, **kwargs)
    it = iter(first)
    stop = len(pairs) // 9 + 40  # interrupt in the middle of epoch 1
    got = [next(it) for _ in range(stop)]
    state = first.state_dict()
    assert state["epoch"] == 1 and state["batch_index"] == 40 and state["seed"] == 11

    resumed = BalancedBatchSampler(pairs, **{**kwargs, "seed": 0})  # the seed comes from the state
    resumed.load_state_dict(state)
    resumed.set_epoch(1)  # a trainer calling set_epoch for the current epoch must not lose the position
    it = iter(resumed)
    got += [next(it) for _ in range(total - stop)]
    assert got == reference


def test_resume_at_an_epoch_boundary_and_state_checks():
    pairs = make_pairs(SIZES)
    s = BalancedBatchSampler(pairs, batch_size=10, seed=1)
    epoch0 = list(s)
    state = s.state_dict()
    assert state == s.state_dict(batches_done=len(epoch0))
    r = BalancedBatchSampler(pairs, batch_size=10, seed=1)
    r.load_state_dict(state)
    assert (r.epoch, r.batch_index) == (1, 0)
    assert list(r) == BalancedBatchSampler(pairs, batch_size=10, seed=1).epoch_batches(1)
    with pytest.raises(ValueError, match="batch_size"):
        BalancedBatchSampler(pairs, batch_size=8).load_state_dict(state)


def test_length_bucketing_reduces_padding():
    pairs = make_pairs(SIZES)
    lengths = np.array([len(p.src) for p in pairs])

    def mean_padding(sampler: BalancedBatchSampler) -> float:
        return float(np.mean([(lengths[b].max() - lengths[b]).mean() for b in sampler]))

    for mode in ("balanced", "proportional"):
        plain = mean_padding(BalancedBatchSampler(pairs, batch_size=12, mode=mode, seed=2))
        bucketed = mean_padding(
            BalancedBatchSampler(pairs, batch_size=12, mode=mode, seed=2, bucket_by_length=True)
        )
        assert bucketed < 0.5 * plain, (mode, plain, bucketed)


def test_works_with_a_dataloader():
    from torch.utils.data import DataLoader

    pairs = make_pairs({"de": 40, "fr": 40})
    loader = DataLoader(pairs, batch_sampler=BalancedBatchSampler(pairs, batch_size=4), collate_fn=list)
    batches = list(loader)
    assert len(batches) == 20 and all(len(b) == 4 for b in batches)


def test_bad_arguments():
    pairs = make_pairs({"de": 5})
    with pytest.raises(ValueError):
        BalancedBatchSampler(pairs, batch_size=0)
    with pytest.raises(ValueError):
        BalancedBatchSampler([], batch_size=2)
    with pytest.raises(ValueError):
        BalancedBatchSampler(pairs, batch_size=2, mode="uniform")  # type: ignore[arg-type]
