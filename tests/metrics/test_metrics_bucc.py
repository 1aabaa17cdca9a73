"""BUCC 2018 mining, threshold protocol, files and synthetic task builder."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from babelspace.errors import CorpusFormatError
from babelspace.evaluation.formats.bucc import build_bucc_task, read_bucc, write_bucc
from babelspace.metrics.bucc import (
    apply_threshold,
    bucc_eval,
    bucc_eval_candidates,
    mine_candidates,
    optimistic_f1,
    precision_recall_f1,
    tune_threshold,
)
from babelspace.retrieval.knn import Candidates


def cands(pairs: list[tuple[int, int]], scores: list[float]) -> Candidates:
    return Candidates(
        np.array([p[0] for p in pairs], dtype=np.int64),
        np.array([p[1] for p in pairs], dtype=np.int64),
        np.array(scores, dtype=np.float32),
    )


def test_threshold_is_tuned_on_train_and_applied_to_test() -> None:
    train = cands([(0, 0), (1, 1), (2, 5), (3, 6)], [0.9, 0.8, 0.7, 0.6])
    train_gold = {(0, 0), (1, 1), (4, 4)}
    test = cands([(0, 9), (1, 1), (2, 2), (3, 3)], [0.9, 0.8, 0.7, 0.6])
    test_gold = {(1, 1), (2, 2), (3, 3)}

    t_train, p, r, f = tune_threshold(train, train_gold)
    assert t_train == pytest.approx(0.75)
    assert (p, r, f) == pytest.approx((100.0, 200 / 3, 80.0))
    t_test, *_ = tune_threshold(test, test_gold)
    assert t_test == pytest.approx(0.6)  # the best threshold on test alone differs

    res = bucc_eval_candidates(train, train_gold, test, test_gold)
    assert res.threshold == t_train
    assert res.train_f1 == pytest.approx(80.0)
    accepted = apply_threshold(test, t_train)
    assert accepted.pairs() == [(0, 9), (1, 1)]
    assert (res.precision, res.recall, res.f1) == pytest.approx((50.0, 100 / 3, 40.0))
    assert (res.precision, res.recall, res.f1) == pytest.approx(
        precision_recall_f1(accepted.pairs(), test_gold)
    )


def test_tune_threshold_edge_cases() -> None:
    assert tune_threshold(cands([], []), {(0, 0)}) == (0.0, 0.0, 0.0, 0.0)
    t, p, r, f = tune_threshold(cands([(0, 1)], [0.5]), {(0, 0)})
    assert f == 0.0 and t > 0.5 and len(apply_threshold(cands([(0, 1)], [0.5]), t)) == 0
    # equal scores cannot be separated: both are in or both out
    t, p, r, f = tune_threshold(cands([(0, 0), (1, 2)], [0.5, 0.5]), {(0, 0)})
    assert t == pytest.approx(0.5) and p == pytest.approx(50.0)
    # all accepted -> threshold is the lowest score
    t, *_ = tune_threshold(cands([(0, 0), (1, 1)], [0.7, 0.4]), {(0, 0), (1, 1)})
    assert t == pytest.approx(0.4)


def test_greedy_one_to_one_never_reuses_an_id() -> None:
    rng = np.random.default_rng(0)
    hub = rng.standard_normal(8)
    src = rng.standard_normal((80, 8)) + 2 * hub
    tgt = rng.standard_normal((50, 8)) + 2 * hub
    for margin in ("ratio", "distance", "absolute"):
        c = mine_candidates(src, tgt, k=4, margin=margin)
        assert len(set(c.src.tolist())) == len(c) and len(set(c.tgt.tolist())) == len(c)
        assert len(c) <= 50
        assert np.all(np.diff(c.scores) <= 0)


def synthetic_split(rng: np.random.Generator, n_gold: int, n_noise: int, d: int = 32):
    base = rng.standard_normal((n_gold, d))
    src = np.concatenate([base + 0.3 * rng.standard_normal((n_gold, d)), rng.standard_normal((n_noise, d))])
    tgt = np.concatenate([base + 0.3 * rng.standard_normal((n_gold, d)), rng.standard_normal((n_noise, d))])
    ps, pt = rng.permutation(len(src)), rng.permutation(len(tgt))
    inv_s, inv_t = np.argsort(ps), np.argsort(pt)
    gold = {(int(inv_s[i]), int(inv_t[i])) for i in range(n_gold)}
    return src[ps], tgt[pt], gold


def test_bucc_eval_end_to_end() -> None:
    rng = np.random.default_rng(1)
    train = synthetic_split(rng, 40, 200)
    test = synthetic_split(rng, 40, 200)
    res = bucc_eval(*train, *test)
    assert res.f1 > 90.0 and res.train_f1 > 90.0
    opt = optimistic_f1(*test)
    assert opt.f1 >= res.f1


def write(path: Path, lines: list[str]) -> None:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")


def test_read_bucc(tmp_path: Path) -> None:
    d = tmp_path / "de-en"
    d.mkdir()
    write(d / "de-en.training.de", ["de-1\tHallo Welt.", "de-2\tGuten Tag."])
    write(d / "de-en.training.en", ["en-1\tGood day.", "en-2\tHello world.", "en-3\tUnrelated."])
    write(d / "de-en.training.gold", ["de-1\ten-2", "de-2\ten-1"])
    split = read_bucc(tmp_path, "de", "training")  # finds the de-en subfolder
    assert split.src_texts == ["Hallo Welt.", "Guten Tag."]
    assert split.gold == [("de-1", "en-2"), ("de-2", "en-1")]
    assert split.gold_indices() == {(0, 1), (1, 0)}


@pytest.mark.parametrize(
    ("which", "lines", "line", "reason"),
    [
        ("de", ["de-1\tHallo.", "de-2 no tab"], 2, "no tab"),
        ("de", ["de-1\tHallo.", "de-1\tNochmal."], 2, "duplicate id"),
        ("en", ["\tHello."], 1, "empty sentence id"),
        ("gold", ["de-1\ten-1", "de-1\ten-9"], 2, "unknown target id"),
        ("gold", ["de-1 en-1"], 1, "expected 'src_id<TAB>tgt_id'"),
    ],
)
def test_read_bucc_rejects_malformed(
    tmp_path: Path, which: str, lines: list[str], line: int, reason: str
) -> None:
    files = {"de": ["de-1\tHallo."], "en": ["en-1\tHello."], "gold": ["de-1\ten-1"]}
    files[which] = lines
    for ext, content in files.items():
        write(tmp_path / f"de-en.test.{ext}", content)
    with pytest.raises(CorpusFormatError, match=reason) as info:
        read_bucc(tmp_path, "de", "test")
    assert str(info.value).startswith(f"{tmp_path / f'de-en.test.{which}'}:{line}: ")


def test_build_bucc_task_and_roundtrip(tmp_path: Path) -> None:
    src = [f"xx sentence {i}" for i in range(20)] + ["xx sentence 0"]  # a repeated text is dropped
    tgt = [f"en sentence {i}" for i in range(20)] + ["en other"]
    d_src = [f"xx noise {i}" for i in range(300)]
    d_tgt = [f"en noise {i}" for i in range(300)]
    task = build_bucc_task(
        src, tgt, d_src, d_tgt, ratio=5.0, seed=3, src_lang="de", distractors_parallel=True
    )
    all_gold = []
    for split in (task.training, task.test):
        assert len(split.gold) == 10
        assert len(split.src_texts) == len(split.tgt_texts) == 10 + 50
        src_by_id = dict(zip(split.src_ids, split.src_texts, strict=True))
        tgt_by_id = dict(zip(split.tgt_ids, split.tgt_texts, strict=True))
        for a, b in split.gold:
            i = int(src_by_id[a].split()[-1])
            assert tgt_by_id[b] == f"en sentence {i}"
            all_gold.append(i)
        noise_s = {int(t.split()[-1]) for t in split.src_texts if "noise" in t}
        noise_t = {int(t.split()[-1]) for t in split.tgt_texts if "noise" in t}
        assert not noise_s & noise_t  # parallel distractors are drawn from disjoint positions
    assert sorted(all_gold) == list(range(20))
    write_bucc(task.training, tmp_path, "training")
    back = read_bucc(tmp_path, "de", "training")
    assert back.src_texts == task.training.src_texts and back.gold == task.training.gold
    assert (
        build_bucc_task(src, tgt, d_src, d_tgt, seed=3).training
        == build_bucc_task(src, tgt, d_src, d_tgt, seed=3).training
    )
