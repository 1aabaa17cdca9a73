"""``--threshold auto``: a threshold aimed at a target precision, calibrated with decoys of the run's
own sentences (babelspace.mining.calibration); never a silent fall-back to LASER's 1.06."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pytest

from babelspace.cli import main
from babelspace.errors import BabelspaceError
from babelspace.mining.calibration import choose_threshold, estimate_precision, midpoint_null, poisson_lower
from babelspace.mining.core import MiningConfig
from babelspace.mining.pipeline import summary_path
from babelspace.mining.threshold import mine_embeddings
from babelspace.vectors.shards import ArrayMatrix
from tests.mining.test_mining_mine import planted, write_lines


def _synthetic(n_true: int, n_false: int, n_decoy: int, seed: int = 0):
    """Scores of a run's one-to-one pairs (true ones higher on average, overlapping) and decoy
    scores from the same distribution as the false ones."""
    rng = np.random.default_rng(seed)
    true = rng.normal(1.12, 0.04, n_true)
    false = rng.normal(1.0, 0.03, n_false)
    decoy = rng.normal(1.0, 0.03, n_decoy)
    scores = np.concatenate([true, false])
    is_true = np.concatenate([np.ones(n_true, bool), np.zeros(n_false, bool)])
    return scores, is_true, decoy


@pytest.mark.parametrize("n_true, n_false", [(50, 5000), (500, 4500), (2000, 500)])
@pytest.mark.parametrize("target", [0.8, 0.9, 0.97])
def test_calibration_reaches_the_target_precision(n_true: int, n_false: int, target: float) -> None:
    scores, is_true, decoy = _synthetic(n_true, n_false, 20_000)
    c = choose_threshold(scores, decoy, target)
    keep = scores >= c.threshold
    precision = is_true[keep].mean()
    recall = is_true[keep].sum() / n_true
    assert c.reached and c.kept == keep.sum() and c.precision >= target
    assert c.precision_low - 0.1 <= precision <= c.precision_high + 0.1, (precision, c)  # + sampling noise
    assert precision >= target - 0.02, (precision, c.threshold)
    # and it is not precise by keeping nothing: a fifth of the true pairs lies above 1.154
    assert recall >= 0.2, recall
    # the loosest such threshold: at every lower score the estimate is below the target
    assert np.all(estimate_precision(scores, decoy).precision[c.kept :] < target)


def test_no_threshold_reaches_the_target_keeps_nothing_and_says_so(caplog) -> None:
    rng = np.random.default_rng(0)
    scores, decoy = rng.normal(1.0, 0.03, 400), rng.normal(1.0, 0.03, 400)  # all false
    with caplog.at_level(logging.WARNING):
        c = choose_threshold(scores, decoy, 0.9)
    assert not c.reached and c.kept == 0 and not np.any(scores.astype(np.float32) >= c.threshold)
    assert "no threshold reaches the target precision 0.90" in caplog.text


def test_small_decoy_cannot_claim_high_precision() -> None:
    """The +1 of the decoy count at the low end: 10 pairs against 5 decoy pairs cannot show 95% there;
    the high end (no +1) can."""
    scores = np.linspace(1.5, 1.4, 10)
    est = estimate_precision(scores, np.full(5, 0.9))
    assert est.precision_low.max() < 0.95 and est.false_high[-1] == pytest.approx(10 / 6)
    assert est.precision_high.min() == 1.0


def test_interval_ends_come_from_their_decoys() -> None:
    """Monolingual decoys (with +1) set the low end; cross-lingual ones, through the 5% Poisson lower
    bound of the false pairs they expect, the high end; the point lies between."""
    scores = np.array([1.3, 1.2, 1.1, 1.0])
    est = estimate_precision(scores, np.array([0.9, 1.05, 1.15, 1.25]), np.array([1.15, 1.05, 0.9]))
    # low end: all 4 pairs, times (M(t) + 1) / 4
    assert np.allclose(est.precision_low, [0, 0.5, 1 - 2 / 3, 1 - 3 / 4])
    # high end: at most 1.5 false pairs expected (2 unrelated-looking pairs x D(t) / 4): none is a
    # plausible count, so it says 1.0 throughout
    assert np.allclose(est.precision_high, 1.0)
    assert np.all(est.precision_low <= est.precision) and np.all(est.precision <= est.precision_high)
    many = estimate_precision(np.linspace(2.0, 1.0, 100), np.linspace(2.0, 1.0, 100))
    # 100 pairs with the decoys' own scores: all 100 expected false at the bottom, at least 84 likely
    assert many.precision_high[-1] == pytest.approx(1 - 84 / 100)


def test_poisson_lower_bound_is_the_counts_5_percent_quantile() -> None:
    """P(X <= k) >= 0.05 first at k: 0 for means up to 2.99, 1 at 4 (P(0) = 0.018, P(<= 1) = 0.092),
    84 at 100; about mean - 1.645 sd above 100."""
    got = poisson_lower(np.array([0.0, 0.5, 2.99, 4.0, 100.0, 10_000.0]), 0.05)
    assert got[:5].tolist() == [0, 0, 0, 1, 84] and got[5] == pytest.approx(10_000 - 164.5, abs=1)


def test_midpoint_null_is_halfway_between_the_decoys_at_every_quantile() -> None:
    rng = np.random.default_rng(0)
    null = midpoint_null(rng.normal(0.0, 1.0, 4000), rng.normal(2.0, 3.0, 3000))
    assert len(null) == 4000 and np.all(np.diff(null) >= 0)
    assert np.quantile(null, 0.5) == pytest.approx(1.0, abs=0.1)
    assert np.quantile(null, 0.9) == pytest.approx(1.0 + 2.0 * 1.2816, abs=0.15)  # N(1, 2): sd (1 + 3) / 2


def test_point_estimate_holds_where_either_decoy_alone_is_off() -> None:
    """False pairs that score between the two decoys (cross-lingual ones too low, monolingual ones too
    high, as measured on planted pairs): the point estimate of the kept pairs' precision is within
    0.10 of what they measure and the interval contains it; either decoy alone as the null misses."""
    rng = np.random.default_rng(1)
    true, false = rng.normal(1.10, 0.04, 30), rng.normal(1.0, 0.03, 1000)
    cross, mono = rng.normal(0.985, 0.025, 1500), rng.normal(1.015, 0.035, 1500)
    scores = np.concatenate([true, false])
    is_true = np.concatenate([np.ones(len(true), bool), np.zeros(len(false), bool)])
    c = choose_threshold(scores, cross, 0.9, mono)
    keep = scores >= c.threshold
    measured = is_true[keep].mean()
    assert c.reached and is_true[keep].sum() >= 10 and abs(c.precision - measured) <= 0.10, (c, measured)
    assert c.precision_low <= measured <= c.precision_high
    k = scores >= choose_threshold(scores, cross, 0.9).threshold  # cross-lingual decoys alone: far too many
    assert is_true[k].mean() < 0.5
    alone = choose_threshold(scores, mono, 0.9)  # monolingual ones alone: the target is never reached
    assert not alone.reached and alone.precision < measured - 0.2


def test_a_score_above_every_decoy_is_not_taken_for_a_true_pair() -> None:
    """The exponential tail: the top scores of 400 false pairs beat all 400 decoys from their own
    distribution by chance; the point estimate does not call them precise."""
    rng = np.random.default_rng(3)
    scores, decoy = rng.normal(1.0, 0.03, 400), rng.normal(1.0, 0.03, 400)
    est = estimate_precision(scores, decoy)
    above = est.thresholds > decoy.max()
    assert above.any() and np.all(est.precision[above] < 0.9)


def test_tiny_easy_corpus_keeps_its_pairs_and_warns(caplog) -> None:
    """12 sources and 12 targets, 10 of them translations: too small for the decoys to show 90%, so the
    high end decides, with a warning, instead of keeping nothing."""
    src, tgt, gold = planted(10, 2, noise=0.3, spread=10.0)
    with caplog.at_level(logging.WARNING):
        r = mine_embeddings(ArrayMatrix(src), ArrayMatrix(tgt), MiningConfig())
    assert r.calibration is not None and r.calibration.small
    assert "uncertain at this size" in caplog.text
    assert len(set(r.pairs.pairs()) & gold) >= 9 and len(r.pairs) <= 11


#: 12 English and 12 German sentences; English line i is the translation of German line TINY_PAIRS[i]
#: for i < 10, the last two lines of each side are unrelated.
TINY_EN = [
    "The train to Berlin leaves at eight in the morning.",
    "My sister bought a new bicycle last week.",
    "Please close the window, it is cold outside.",
    "The museum is closed on Mondays.",
    "We ate fresh bread and cheese for breakfast.",
    "The children are playing football in the park.",
    "He forgot his umbrella at the office.",
    "The river flooded the village after the storm.",
    "She reads a newspaper every evening.",
    "Our neighbours have two black cats.",
    "The invoice must be paid within thirty days.",
    "Turn left at the second traffic light.",
]
TINY_DE = [
    "Meine Schwester hat letzte Woche ein neues Fahrrad gekauft.",
    "Der Zug nach Berlin fährt um acht Uhr morgens ab.",
    "Das Museum ist montags geschlossen.",
    "Bitte schließ das Fenster, draußen ist es kalt.",
    "Die Kinder spielen im Park Fußball.",
    "Wir haben zum Frühstück frisches Brot und Käse gegessen.",
    "Der Fluss hat das Dorf nach dem Sturm überflutet.",
    "Er hat seinen Regenschirm im Büro vergessen.",
    "Unsere Nachbarn haben zwei schwarze Katzen.",
    "Sie liest jeden Abend eine Zeitung.",
    "Die Berge waren im Winter mit Schnee bedeckt.",
    "Ich trinke meinen Kaffee am liebsten ohne Zucker.",
]
TINY_PAIRS = [1, 0, 3, 2, 5, 4, 7, 6, 9, 8]


@pytest.mark.slow
def test_tiny_real_corpus_keeps_its_ten_translations(e5_small_path: Path, caplog) -> None:
    """e5-small on 12 + 12 sentences, 10 of them translations: all 10 kept and nothing else, with the
    warning that the estimate is uncertain at this size (reported as an interval), never nothing."""
    from babelspace.models.backends import load_backend_encoder
    from babelspace.models.encoder import encode

    model = load_backend_encoder(str(e5_small_path))
    src, tgt = (np.asarray(encode(model, t, show_progress=False, normalize=True)) for t in (TINY_EN, TINY_DE))
    with caplog.at_level(logging.WARNING):
        r = mine_embeddings(ArrayMatrix(src), ArrayMatrix(tgt), MiningConfig())
    assert set(r.pairs.pairs()) == set(enumerate(TINY_PAIRS))
    cal = r.calibration
    assert cal is not None and cal.small and cal.precision_kind == "interval" and cal.precision_high == 1.0
    assert "uncertain at this size" in caplog.text


def test_too_small_a_run_is_said_and_needs_support_at_its_low_end(caplog) -> None:
    """A run with a few dozen decoy pairs keeps a set only when the interval's low end supports it,
    and says in its one warning that the estimate is uncertain at this size; decoys that outscore the
    run's pairs keep nothing (said, never silent)."""
    scores, low = np.array([1.4, 1.3, 1.2, 1.1, 1.05, 1.0]), np.array([0.9, 0.85, 0.8, 0.8, 0.95])
    with caplog.at_level(logging.WARNING):
        c = choose_threshold(scores, low, 0.9, low)
    assert c.small and c.reached and c.kept == 6
    assert len(caplog.records) == 1 and "uncertain at this size" in caplog.text
    caplog.clear()
    high = np.array([1.5, 1.45, 1.35, 1.25, 1.15])
    with caplog.at_level(logging.WARNING):
        c = choose_threshold(scores[:5], high, 0.9, high)
    assert c.kept == 0 and not c.reached and "nothing is kept" in caplog.text
    assert len(caplog.records) == 1 and "uncertain at this size" in caplog.text
    assert not choose_threshold(scores, np.linspace(1.5, 1.0, 200), 0.9).small


def test_default_threshold_is_calibrated_without_a_language_pair() -> None:
    """No language pair, no threshold given: calibrated all the same (never LASER's 1.06), recall
    not estimated; the kept pairs are about as precise as asked."""
    assert MiningConfig().threshold == "auto" and MiningConfig(threshold=None).threshold == "auto"
    src, tgt, gold = planted(60, 900)
    r = mine_embeddings(ArrayMatrix(src), ArrayMatrix(tgt), MiningConfig(max_memory="16MB"))
    cal = r.calibration
    assert cal is not None and cal.recall is None and cal.gold == 0 and cal.reached
    assert r.threshold != 1.06 and cal.decoy_pairs > 600
    pairs = set(r.pairs.pairs())
    precision = len(pairs & gold) / len(pairs)
    fixed = set(
        mine_embeddings(ArrayMatrix(src), ArrayMatrix(tgt), MiningConfig(threshold=1.06)).pairs.pairs()
    )
    # 0.79 measured against an estimate of 0.91: false pairs that are each other's best neighbours
    # leave the decoys with the true ones (docs/mining.md); 1.06 keeps 149 pairs at 0.40
    assert precision >= 0.75 and precision > len(fixed & gold) / len(fixed) + 0.2
    assert len(pairs & gold) >= 0.9 * len(gold)


def test_planted_known_pairs_estimate_recall() -> None:
    src, tgt, _ = planted(100, 900, seed=1)
    known = _aligned(*planted(200, 0, seed=2))
    cfg = MiningConfig(src_lang="en", tgt_lang="de", max_memory="16MB")
    cal = mine_embeddings(ArrayMatrix(src), ArrayMatrix(tgt), cfg, gold=known).calibration
    assert cal is not None and cal.gold == 100 * cal.splits  # a tenth of each fold's 500 sources, each split
    assert cal.recall is not None and cal.recall >= 0.9


def _aligned(src: np.ndarray, tgt: np.ndarray, gold: set[tuple[int, int]]) -> tuple[np.ndarray, np.ndarray]:
    """Rows of ``tgt`` reordered so that row i of each is a known pair."""
    pairs = sorted(gold)
    return src[[s for s, _ in pairs]], tgt[[t for _, t in pairs]]


def test_a_parallel_corpus_keeps_its_pairs() -> None:
    """Every source has its translation: the decoys (sources against targets other than their mutual
    partners) score low, and the conservative estimate does not throw the pairs away."""
    src, tgt, gold = planted(600, 0)
    r = mine_embeddings(ArrayMatrix(src), ArrayMatrix(tgt), MiningConfig())
    assert len(set(r.pairs.pairs()) & gold) >= 0.95 * len(gold)


def test_target_precision_is_validated(capsys) -> None:
    with pytest.raises(BabelspaceError, match="--target-precision must be between 0 and 1"):
        MiningConfig(target_precision=1.0)
    with pytest.raises(SystemExit):
        main(
            ["mine", "--src", "a", "--tgt", "b", "--model", "m", "--out", "o.tsv", "--target-precision", "90"]
        )
    assert "--target-precision" in capsys.readouterr().err


def test_summary_reports_the_estimates(tmp_path: Path, tiny_model_dir: Path) -> None:
    """The tiny random model cannot pair anything: auto keeps nothing, and the summary and the printed
    line say what it estimated; the languages are recorded for `babelspace train`."""
    words = "the a god lord king people land house city day cat dog".split()
    lines = [f"{a} {b} {c}" for a in words for b in words[:5] for c in ("one", "two")]
    src = write_lines(tmp_path / "s.txt", lines[::2])
    tgt = write_lines(tmp_path / "t.txt", lines[1::2])
    out = tmp_path / "p.tsv"
    assert main(["mine", "--src", str(src), "--tgt", str(tgt), "--model", str(tiny_model_dir), "--out", str(out),
                 "--src-lang", "xx", "--tgt-lang", "de", "--no-progress"]) == 2  # fmt: skip
    assert main(["mine", "--src", str(src), "--tgt", str(tgt), "--model", str(tiny_model_dir), "--out", str(out),
                 "--src-lang", "fr", "--tgt-lang", "de", "--check-recall", "--no-progress"]) == 0  # fmt: skip
    summary = json.loads(summary_path(out).read_text())
    assert (summary["src_lang"], summary["tgt_lang"]) == ("fr", "de")
    cal = summary["calibration"]
    assert cal["target_precision"] == 0.9 and cal["decoy_pairs"] > 0 and cal["gold"] > 0
    assert summary["precision_kind"] == cal["precision_kind"] in ("point", "interval")
    assert summary["precision_interval"] == [cal["precision_low"], cal["precision_high"]]
    assert (
        summary["precision_estimate"] == cal["precision_estimate"]
        and summary["estimated_recall"] == cal["recall"]
    )
    assert summary["threshold_source"].startswith("auto: target precision 90%")
    assert "kept pairs estimated at " in summary["threshold_source"]
    assert summary["pairs"] == len(out.read_text().splitlines())
