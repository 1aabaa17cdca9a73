"""``babelspace score --threshold auto``: a true derangement as the null, strict JSON, nothing kept
(and said, exit status 1) where no threshold does what was asked, and the default threshold where
the densities of related and unrelated rows cross, with estimated precision, recall and AUC."""

from __future__ import annotations

import argparse
import json
import logging
import random
from pathlib import Path

import numpy as np
import pytest

from babelspace.cli.score import add_score_parser
from babelspace.errors import BabelspaceError
from babelspace.mining.filters import FilterOptions, apply_filters
from babelspace.mining.pipeline import summary_path
from babelspace.mining.score import NOTHING_KEPT, ScoreConfig, ScoreInputs, score_bitext
from babelspace.mining.score_threshold import SEPARATES_AUC, derangement, score_threshold

WORDS = "hello world cat dog sits mat rain today good bad big small one two three".split()


def _sentences(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    out: list[str] = []
    while len(out) < n:
        s = " ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 8)))
        if s not in out:
            out.append(s)
    return out


def _strict(path: Path) -> dict:
    def refuse(name: str) -> None:
        raise ValueError(f"non-finite number {name} in {path}")

    return json.loads(path.read_text(encoding="utf-8"), parse_constant=refuse)


@pytest.mark.parametrize("n", [2, 3, 4, 5, 7])
def test_the_null_is_a_derangement_for_every_size(n: int) -> None:
    for seed in range(200):
        perm = derangement(n, seed)
        assert sorted(perm.tolist()) == list(range(n)) and not np.any(perm == np.arange(n))
    assert derangement(2, 0).tolist() == [1, 0]


def test_a_two_row_bitext_writes_strict_json(tmp_path: Path, tiny_model_dir: Path) -> None:
    tsv = tmp_path / "two.tsv"
    tsv.write_text("hello world cat\thello world cat !\nrain today good\train today good !\n")
    inputs = ScoreInputs(str(tsv), src_lang="en", tgt_lang="de")
    no_copies = FilterOptions(identical=False)
    s = score_bitext(inputs, tmp_path / "k.tsv", str(tiny_model_dir), filters=no_copies)
    summary = _strict(summary_path(tmp_path / "k.tsv"))
    assert summary["threshold"] == s["threshold"] and summary["auto"]["null_rows"] == 2
    with pytest.raises(BabelspaceError, match="finite"):
        ScoreConfig(threshold=float("inf"))
    parser = argparse.ArgumentParser()
    add_score_parser(parser.add_subparsers())
    with pytest.raises(SystemExit):
        parser.parse_args(["score", str(tsv), "--model", "m", "--out", "o", "--threshold", "inf"])


def test_no_threshold_reaching_the_target_keeps_nothing_and_exits_1(
    tmp_path: Path, tiny_model_dir: Path, capsys: pytest.CaptureFixture
) -> None:
    sents = _sentences(40, seed=5)
    tsv = tmp_path / "unrelated.tsv"
    tsv.write_text("".join(f"{a}\t{b}\n" for a, b in zip(sents[:20], sents[20:], strict=True)))
    out = tmp_path / "k.tsv"
    parser = argparse.ArgumentParser()
    add_score_parser(parser.add_subparsers())
    argv = ["score", str(tsv), "--model", str(tiny_model_dir), "--out", str(out), "--tgt-lang", "de"]
    args = parser.parse_args([*argv, "--target-precision", "0.9", "--no-progress"])
    assert args.func(args) == NOTHING_KEPT
    printed = capsys.readouterr().out
    assert "kept 0 of 20 rows with no threshold" in printed and "nothing kept" in printed
    assert out.read_text() == ""
    summary = _strict(summary_path(out))
    assert summary["kept"] == 0 and summary["reached"] is False and summary["threshold"] is None


def test_unrelated_rows_alone_keep_nothing_by_default() -> None:
    rng = np.random.default_rng(1)
    for n in (20, 200):
        cut = score_threshold(rng.normal(1.0, 0.03, n), rng.normal(1.0, 0.03, n))
        assert not cut.reached and cut.kept == 0 and cut.threshold is None


@pytest.mark.parametrize("share", [0.05, 0.2, 0.3])
def test_the_default_sits_where_the_densities_cross(share: float) -> None:
    rng = np.random.default_rng(int(share * 100))
    n = 2000
    bad = round(share * n)
    # related rows wider than unrelated ones, as margin scores of translations are
    good_scores, bad_scores = rng.normal(1.16, 0.04, n - bad), rng.normal(1.0, 0.03, bad)
    scores = np.concatenate([good_scores, bad_scores])
    null = rng.normal(1.0, 0.03, n)
    cut = score_threshold(scores, null)
    kept_good = float(np.mean(good_scores >= cut.threshold))
    dropped_bad = float(np.mean(bad_scores < cut.threshold))
    assert cut.reached and cut.rule == "crossing" and cut.auc is not None and cut.auc >= SEPARATES_AUC
    assert kept_good >= 0.97 and dropped_bad >= 0.95
    # halfway between the two means, pulled toward the narrower unrelated scores
    assert 1.06 < cut.threshold < 1.10
    measured_precision = np.sum(good_scores >= cut.threshold) / cut.kept
    assert abs(cut.precision - measured_precision) < 0.03 and abs(cut.recall - kept_good) < 0.03
    # a target precision is the other rule: the loosest threshold whose estimate reaches it
    strict = score_threshold(scores, null, 0.999)
    assert strict.rule == "target_precision" and strict.precision >= 0.999
    assert strict.threshold == float(np.min(scores[scores >= strict.threshold]))


def test_a_score_that_cannot_separate_says_so_and_by_how_much(caplog: pytest.LogCaptureFixture) -> None:
    rng = np.random.default_rng(2)
    scores = np.concatenate([rng.normal(1.05, 0.03, 800), rng.normal(1.0, 0.03, 200)])
    with caplog.at_level(logging.WARNING):
        cut = score_threshold(scores, rng.normal(1.0, 0.03, 1000))
    assert cut.auc is not None and cut.auc < SEPARATES_AUC and not cut.separates
    note = cut.separation_note()
    assert note is not None and f"{cut.auc:.3f}" in note and f"{SEPARATES_AUC - cut.auc:.3f} below" in note
    assert (
        len([r for r in caplog.records if "separates related from unrelated rows poorly" in r.message]) == 1
    )


def test_duplicates_and_identical_sides_are_dropped_by_default() -> None:
    src = ["The cat sits.", "the cat  sits", "Good morning to you all", "Thank you", "Guernsey"]
    tgt = ["Die Katze sitzt.", "Die Katze sitzt!", "Good morning to you all!", "Danke", "Guernsey"]
    r = apply_filters(src, tgt, ["en"] * 5, ["de"] * 5, FilterOptions())
    assert r.reasons == [None, "duplicates", "identical", None, None]  # a short name is no copy
    off = FilterOptions(duplicates=False, identical=False)
    assert apply_filters(src, tgt, ["en"] * 5, ["de"] * 5, off).reasons == [None] * 5
    parser = argparse.ArgumentParser()
    add_score_parser(parser.add_subparsers())
    args = parser.parse_args(["score", "b.tsv", "--model", "m", "--out", "o.tsv", "--no-filter-duplicates"])
    assert (args.filter_duplicates, args.filter_identical) == (False, True)
