"""BalancedBatchSampler: balance per language pair, determinism, exact resume, length bucketing."""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from babelspace.data.pairs import ParallelPair
from babelspace.data.sampling import BalancedBatchSampler


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


# ----------------------------------------------------------------- distinct texts (issue 12)
def shared_english_pairs(n_langs: int = 21, n_verses: int = 600, seed: int = 0) -> list[ParallelPair]:
    """Every language paired with the same English text of each verse (as in the offline Bible)."""
    rng = random.Random(seed)
    english = [f"v{v} " + "w" * rng.randint(5, 200) for v in range(n_verses)]
    langs = [f"l{i:02d}" for i in range(n_langs)]
    return [
        ParallelPair(english[v], f"{lang} {v}", "en", lang, f"mem:{lang}:{v}")
        for lang in langs
        for v in range(n_verses)
    ]


def texts_shared_in(batch: list[int], pairs: list[ParallelPair]) -> int:
    texts = [t for i in batch for t in {pairs[i].src, pairs[i].tgt}]
    return len(texts) - len(set(texts))


def mean_padding(batches: list[list[int]], pairs: list[ParallelPair]) -> float:
    lengths = np.array([len(p.src) for p in pairs])
    return float(np.mean([(lengths[b].max() - lengths[b]).mean() for b in batches]))


@pytest.mark.parametrize("bucket", [False, True])
def test_distinct_texts_keeps_one_english_sentence_per_batch(bucket):
    pairs = shared_english_pairs()
    kwargs = dict(batch_size=64, bucket_by_length=bucket, seed=4, num_batches=120)
    plain = BalancedBatchSampler(pairs, **kwargs).epoch_batches(0)
    distinct_sampler = BalancedBatchSampler(pairs, distinct_texts=True, **kwargs)
    distinct = distinct_sampler.epoch_batches(0)
    assert sum(texts_shared_in(b, pairs) > 0 for b in plain) > 60  # the defect: copies of one verse
    assert all(texts_shared_in(b, pairs) == 0 for b in distinct)
    assert distinct_sampler.last_epoch_clashes == 0
    # Balance is untouched: the same counts per language pair in every batch.
    for a, b in zip(plain, distinct, strict=True):
        assert len(b) == 64
        assert Counter(pairs[i].tgt_lang for i in a) == Counter(pairs[i].tgt_lang for i in b)
    if bucket:  # most of the bucketing gain stays
        unbucketed = mean_padding(
            BalancedBatchSampler(pairs, distinct_texts=True, **{**kwargs, "bucket_by_length": False}), pairs
        )
        assert mean_padding(distinct, pairs) < 0.35 * unbucketed


def test_distinct_texts_resumes_exactly():
    pairs = shared_english_pairs(n_langs=5, n_verses=200)
    kwargs = dict(batch_size=20, bucket_by_length=True, seed=2, infinite=True, distinct_texts=True)
    reference_it = iter(BalancedBatchSampler(pairs, **kwargs))
    reference = [next(reference_it) for _ in range(120)]
    first = BalancedBatchSampler(pairs, **kwargs)
    it = iter(first)
    got = [next(it) for _ in range(70)]
    resumed = BalancedBatchSampler(pairs, **kwargs)
    resumed.load_state_dict(first.state_dict())
    it = iter(resumed)
    got += [next(it) for _ in range(50)]
    assert got == reference
    with pytest.raises(ValueError, match="distinct_texts"):
        BalancedBatchSampler(pairs, **{**kwargs, "distinct_texts": False}).load_state_dict(first.state_dict())


def test_distinct_texts_reports_what_it_cannot_separate():
    pairs = shared_english_pairs(n_langs=4, n_verses=3)  # 3 English texts, 8 pairs per batch
    sampler = BalancedBatchSampler(pairs, batch_size=8, distinct_texts=True, num_batches=2)
    sampler.epoch_batches(0)
    assert sampler.last_epoch_clashes > 0


@pytest.mark.slow
def test_distinct_texts_on_the_bible_train_split():
    from babelspace.data.bible import bible_pairs

    pairs = list(bible_pairs(split="train").pairs)
    kwargs = dict(batch_size=64, bucket_by_length=True, seed=0, num_batches=400)
    plain = BalancedBatchSampler(pairs, **kwargs).epoch_batches(0)
    distinct = BalancedBatchSampler(pairs, distinct_texts=True, **kwargs).epoch_batches(0)
    assert sum(texts_shared_in(b, pairs) > 0 for b in plain) > 50
    assert all(texts_shared_in(b, pairs) == 0 for b in distinct)
    assert mean_padding(distinct, pairs) < 1.25 * mean_padding(plain, pairs)


# ----------------------------------------------------------------- group keys and weights
def test_group_weights_set_each_groups_share():
    pairs = make_pairs({"de": 3000, "fr": 3000, "sw": 3000})
    weights = {("en", "de"): 2.0, ("en", "fr"): 1.0, ("en", "sw"): 0.5}
    batches = BalancedBatchSampler(pairs, batch_size=14, group_weights=weights, seed=0).epoch_batches(0)
    totals = Counter(pairs[i].tgt_lang for b in batches for i in b)
    n = sum(totals.values())
    for (_, lang), w in weights.items():
        assert totals[lang] / n == pytest.approx(w / 3.5, abs=0.002)
    for b in batches:  # every batch close to its share, not only the total
        c = Counter(pairs[i].tgt_lang for i in b)
        assert abs(c["de"] - 8) <= 1 and abs(c["fr"] - 4) <= 1 and abs(c["sw"] - 2) <= 1


def test_equal_weights_are_the_balanced_sampler():
    pairs = make_pairs(SIZES)
    plain = BalancedBatchSampler(pairs, batch_size=7, seed=1, bucket_by_length=True)
    ones = {("en", lang): 1.0 for lang in SIZES}
    weighted = BalancedBatchSampler(pairs, batch_size=7, seed=1, bucket_by_length=True, group_weights=ones)
    assert plain.epoch_batches(2) == weighted.epoch_batches(2)


def test_group_key_and_weights_resume_exactly():
    pairs = make_pairs({"de": 500, "fr": 300}) + [
        ParallelPair(f"s{i}", f"t{i}", "en", "de", f"other.tsv:{i}") for i in range(80)
    ]
    kwargs = dict(
        batch_size=9,
        seed=3,
        infinite=True,
        bucket_by_length=True,
        group_key=lambda p: p.origin.split(":")[0],
        group_weights={"other.tsv": 0.25, "mem": 1.0},
    )
    reference_it = iter(BalancedBatchSampler(pairs, **kwargs))
    reference = [next(reference_it) for _ in range(250)]  # crosses epoch boundaries
    share = Counter(pairs[i].origin.startswith("other") for b in reference for i in b)
    assert share[True] / (share[True] + share[False]) == pytest.approx(0.2, abs=0.01)
    first = BalancedBatchSampler(pairs, **kwargs)
    it = iter(first)
    got = [next(it) for _ in range(111)]
    resumed = BalancedBatchSampler(pairs, **kwargs)
    resumed.load_state_dict(first.state_dict())
    it = iter(resumed)
    got += [next(it) for _ in range(139)]
    assert got == reference
    with pytest.raises(ValueError, match="group_weights"):
        BalancedBatchSampler(pairs, **{**kwargs, "group_weights": {"other.tsv": 0.5}}).load_state_dict(
            first.state_dict()
        )


def test_bad_group_weights():
    pairs = make_pairs({"de": 20, "fr": 20})
    with pytest.raises(ValueError, match="does not have"):
        BalancedBatchSampler(pairs, batch_size=4, group_weights={("en", "xx"): 1.0})
    with pytest.raises(ValueError, match="> 0"):
        BalancedBatchSampler(pairs, batch_size=4, group_weights={("en", "de"): 0.0})
    with pytest.raises(ValueError, match="balanced"):
        BalancedBatchSampler(pairs, batch_size=4, mode="proportional", group_weights={("en", "de"): 2.0})


def test_weighted_sample_follows_weights_and_caps_small_groups() -> None:
    """Shares follow the weights; a group smaller than its share gives the rest to the others in
    their weight ratio; seeded, in corpus order, no pair twice."""
    from babelspace.data.apportionment import group_members, weighted_sample_indices

    codes = np.repeat([0, 1, 2], [1000, 500, 30])  # de, fr, sw
    members = group_members(codes, 3)
    weights = np.array([2.0, 1.0, 1.0])
    picked = weighted_sample_indices(members, weights, 300, 5)
    # sw's share is 75 but it has 30: the other 45 go 2:1 to de and fr (150 + 30, 75 + 15)
    assert np.bincount(codes[picked], minlength=3).tolist() == [180, 90, 30]
    assert picked.tolist() == sorted(set(picked.tolist()))
    assert np.array_equal(picked, weighted_sample_indices(members, weights, 300, 5))
    assert not np.array_equal(picked, weighted_sample_indices(members, weights, 300, 6))
    assert len(weighted_sample_indices(members, np.ones(3), 5000, 0)) == len(codes)


# ----------------------------------------------------------------- on-demand windows, index arrays
REFERENCE = Path(__file__).parents[1] / "fixtures" / "sampler_reference.json"


def test_on_demand_batches_equal_the_whole_epoch_sampler() -> None:
    """Batches computed window by window from (seed, step) equal the reference batches of the
    sampler that planned whole epochs at once (tests/fixtures/sampler_reference.json, written by it),
    for balanced, uneven, weighted, bucketed, plain and proportional settings, across an epoch end."""
    ref = json.loads(REFERENCE.read_text())
    pairs = make_pairs(ref["sizes"])
    for name, config in ref["configs"].items():
        kwargs = dict(config["kwargs"])
        if "group_weights" in kwargs:
            kwargs["group_weights"] = {tuple(k): w for k, w in kwargs["group_weights"]}
        sampler = BalancedBatchSampler(pairs, infinite=True, **kwargs)
        got = [sampler.batch(step) for step in range(len(config["batches"]))]
        assert got == config["batches"], name


@pytest.mark.parametrize("distinct", [False, True])
def test_any_step_resumes_exactly(distinct: bool) -> None:
    pairs = make_pairs({"de": 300, "fr": 90, "sw": 40})
    kwargs = dict(batch_size=9, seed=4, bucket_by_length=True, infinite=True, distinct_texts=distinct)
    stream = BalancedBatchSampler(pairs, **kwargs)
    it = iter(stream)
    reference = [next(it) for _ in range(130)]
    for step in random.Random(0).sample(range(120), 12):
        fresh = BalancedBatchSampler(pairs, **kwargs)
        assert fresh.batch(step) == reference[step]
        fresh.load_state_dict(stream.state_dict(batches_done=step))
        resumed = iter(fresh)
        assert [next(resumed) for _ in range(10)] == reference[step : step + 10]


def test_random_mode_is_plain_shuffled_batches_over_the_corpus() -> None:
    pairs = make_pairs({"de": 60, "fr": 30, "sw": 10})
    sampler = BalancedBatchSampler(pairs, batch_size=10, mode="random", bucket_by_length=True, seed=1)
    assert not sampler.bucket_by_length
    batches = sampler.epoch_batches(0)
    assert sorted(i for b in batches for i in b) == list(range(100))  # every pair once per epoch
    assert batches != BalancedBatchSampler(pairs, batch_size=10, mode="random", seed=2).epoch_batches(0)
    with pytest.raises(ValueError, match="need mode='balanced'"):
        BalancedBatchSampler(pairs, batch_size=10, mode="random", group_weights={("en", "de"): 1.0})


@pytest.mark.parametrize("distinct", [False, True])
def test_converted_corpus_arrays_give_the_batches_of_its_pairs(tmp_path, distinct: bool) -> None:
    """The sampler over a converted corpus's integer arrays (hashed text ids, memory-mapped lengths)
    draws exactly the batches it draws over the same pairs read into memory."""
    from babelspace.data.arrow_corpus import CorpusRows, ReadOptions, open_corpus
    from babelspace.data.indexed_pairs import PairParts
    from babelspace.data.readers import read_tsv

    rng = random.Random(0)
    english = [" ".join(rng.choice("abcdefgh") * rng.randint(1, 6) for _ in range(3)) for _ in range(40)]
    lines = [f"{e}\t{lang} {i}\ten\t{lang}" for lang in ("de", "fr", "sw") for i, e in enumerate(english)]
    rng.shuffle(lines)
    path = tmp_path / "c.tsv"
    path.write_text("\n".join(lines) + "\n")
    parts = PairParts([(str(path), CorpusRows(open_corpus(str(path), ReadOptions(), tmp_path / "cache")))])
    kwargs = dict(batch_size=12, seed=2, bucket_by_length=True, distinct_texts=distinct, infinite=True)
    indexed = BalancedBatchSampler(parts.arrays(False, distinct), **kwargs)
    listed = BalancedBatchSampler(read_tsv(path).pairs, **kwargs)
    assert [indexed.batch(s) for s in range(25)] == [listed.batch(s) for s in range(25)]


@pytest.mark.parametrize(
    ("kw", "window"),
    [
        ({}, 50),
        ({"bucket_by_length": True}, 4),
        ({"mode": "proportional"}, 3),
        ({"group_weights": {("en", "de"): 5.0, ("en", "sw"): 0.5}}, 2),
        ({"distinct_texts": True, "bucket_by_length": True}, 3),
    ],
)
def test_covers_all_is_never_wrong_and_holds_for_long_plans(kw, window):
    """``covers_all(steps)`` (closed form) implies that the first ``steps`` batches hold every pair,
    checked by enumerating the batches; a plan far longer than the corpus is covered."""
    pairs = make_pairs({"de": 40, "fr": 9, "sw": 3}, seed=1)
    sampler = BalancedBatchSampler(
        pairs, batch_size=6, seed=2, infinite=True, bucket_window=window, num_batches=5, **kw
    )
    seen: set[int] = set()
    claimed = 0
    for steps in range(0, 60):
        if sampler.covers_all(steps):
            claimed += 1
            assert seen == set(range(len(pairs))), steps
        seen.update(sampler.batch(steps))
    assert claimed > 0
    assert sampler.covers_all(10**9)
    assert not BalancedBatchSampler(make_pairs({"de": 4000}), batch_size=6).covers_all(10)
