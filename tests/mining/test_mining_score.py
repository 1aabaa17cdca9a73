"""``babelspace score``: cheap filters, margin scores of an existing bitext, the shuffled-row threshold,
the outputs (kept rows train as mine output), background files and bad input."""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

import numpy as np
import pytest

from babelspace.cli.score import add_score_parser
from babelspace.errors import BabelspaceError, CorpusFormatError
from babelspace.mining.filters import FilterOptions, apply_filters, dominant_script
from babelspace.mining.pipeline import summary_path
from babelspace.mining.score import ScoreConfig, ScoreInputs, score_bitext, scores_path
from babelspace.mining.score_threshold import score_threshold
from babelspace.vectors.shards import ArrayMatrix, StackedMatrix

WORDS = "hello world cat dog sits mat rain today good bad big small one two three".split()


#: The tiny random model scores only near-copies as related: the planted "translations" are near-copies.
COPIES_KEPT = FilterOptions(identical=False)


def _sentences(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    out: list[str] = []
    while len(out) < n:
        s = " ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 8)))
        if s not in out:
            out.append(s)
    return out


def _score(tmp_path: Path, model: Path, rows: list[tuple[str, str]], **kw) -> dict:
    tsv = tmp_path / "bitext.tsv"
    tsv.write_text("".join(f"{a}\t{b}\n" for a, b in rows), encoding="utf-8")
    cfg = kw.pop("config", ScoreConfig(threshold="auto", target_precision=0.8))
    inputs = ScoreInputs(str(tsv), src_lang="en", tgt_lang="de", **kw.pop("inputs", {}))
    return score_bitext(
        inputs, tmp_path / "kept.tsv", str(model), cfg, filters=kw.pop("filters", COPIES_KEPT)
    )


# ----------------------------------------------------------------------------- filters


def test_each_filter_flags_its_rows_and_counts_them() -> None:
    hello = "hello and welcome to all of you"
    src = ["the train leaves at noon today", hello, hello, "a", "Good morning to you all", "cat and dog"]
    tgt = [
        "der Zug fährt heute um zwölf",
        hello,
        hello,
        "a very long translation indeed",
        "Доброе утро",
        "x",
    ]
    opts = FilterOptions(duplicates=True, identical=True, length_ratio=3.0, script=True)
    r = apply_filters(src, tgt, ["en"] * 6, ["de"] * 6, opts)
    assert r.reasons == [None, "identical", "duplicates", "length_ratio", "script", "length_ratio"]
    assert r.flagged == {"duplicates": 1, "identical": 2, "length_ratio": 2, "script": 1}
    assert r.dropped == {"duplicates": 1, "identical": 1, "length_ratio": 2, "script": 1}
    off = FilterOptions(duplicates=False, identical=False)
    assert apply_filters(src, tgt, ["en"] * 6, ["de"] * 6, off).reasons == [None] * 6


def test_near_identical_and_script_heuristics() -> None:
    r = apply_filters(["Hello, World! Welcome."], ["hello world welcome"], ["en"], ["de"], FilterOptions())
    assert r.reasons == ["identical"]
    # a short string that is the same in both languages (a name) is not flagged
    assert apply_filters(["Burkina Faso"], ["Burkina Faso"], ["en"], ["de"], FilterOptions()).reasons == [
        None
    ]
    assert dominant_script("東京は大きい") == "CJK" and dominant_script("Привет") == "CYRILLIC"
    # a language without a table entry takes the script most of its rows use
    r = apply_filters(
        ["a b"] * 3, ["ok one", "ok two", "Ελλάδα"], ["en"] * 3, ["xx"] * 3, FilterOptions(script=True)
    )
    assert r.reasons == [None, None, "script"]


def test_language_filter_uses_the_offline_identifier() -> None:
    pytest.importorskip("py3langid")
    src = ["The train leaves the station at twelve o'clock.", "The weather is lovely today, isn't it?"]
    tgt = [
        "Der Zug verlässt den Bahnhof um zwölf Uhr.",
        "Le temps est magnifique aujourd'hui, n'est-ce pas ?",
    ]
    r = apply_filters(src, tgt, ["en", "en"], ["de", "de"], FilterOptions(lang=True))
    assert r.reasons == [None, "lang"]
    with pytest.raises(BabelspaceError, match="--src-lang"):
        apply_filters(src, tgt, [None, None], ["de", "de"], FilterOptions(lang=True))


# ----------------------------------------------------------------------------- threshold and matrices


def test_null_threshold_separates_translations_from_shuffled_rows() -> None:
    rng = np.random.default_rng(0)
    good, bad = rng.normal(1.15, 0.02, 700), rng.normal(1.0, 0.03, 300)
    null = rng.normal(1.0, 0.03, 1000)
    cal = score_threshold(np.concatenate([good, bad]), null, 0.95)
    kept = np.concatenate([good, bad]) >= cal.threshold
    assert cal.reached and 0.2 < cal.unrelated_share < 0.4
    assert kept[:700].mean() > 0.95 and kept[700:].mean() < 0.1
    assert abs(cal.precision - kept[:700].sum() / kept.sum()) < 0.05


def test_stacked_matrix_reads_like_one_array() -> None:
    a, b = np.arange(12, dtype=np.float32).reshape(6, 2), -np.arange(8, dtype=np.float32).reshape(4, 2)
    m = StackedMatrix([ArrayMatrix(a, block_rows=4), ArrayMatrix(b)])
    whole = np.vstack([a, b])
    assert len(m) == 10 and np.array_equal(m.rows(3, 9), whole[3:9])
    assert np.array_equal(m.take(np.array([9, 0, 6, 5])), whole[[9, 0, 6, 5]])
    assert np.array_equal(np.vstack([p for _, p in m.blocks(2, 10, 3)]), whole[2:10])


# ----------------------------------------------------------------------------- the pipeline


def test_score_keeps_true_rows_drops_shuffled_and_trains(tmp_path: Path, tiny_model_dir: Path) -> None:
    sents = _sentences(80)
    good = [(s, s + " !") for s in sents[:60]]
    bad = list(zip(sents[60:70], sents[70:80], strict=True))
    rows = good + bad + [good[0]]
    cfg = ScoreConfig(threshold="auto", target_precision=0.97)
    s = _score(tmp_path, tiny_model_dir, rows, config=cfg, filters=COPIES_KEPT)
    assert s["rows"] == 71 and s["filters"]["dropped"] == {"duplicates": 1}
    verdicts = [line.split("\t")[2] for line in scores_path(tmp_path / "kept.tsv").read_text().splitlines()]
    assert len(verdicts) == 71 and verdicts[-1] == "duplicates"
    kept = {tuple(line.split("\t")[3:5]) for line in (tmp_path / "kept.tsv").read_text().splitlines()}
    precision = len(kept & set(good)) / len(kept)
    assert len(kept & set(good)) >= 45 and abs(precision - s["precision"]) < 0.05
    assert s["reached"] and "estimated precision" in s["threshold_source"]
    summary = json.loads(summary_path(tmp_path / "kept.tsv").read_text())
    assert (summary["src_lang"], summary["tgt_lang"]) == ("en", "de")
    from babelspace.data.readers import load_parallel

    corpus = load_parallel(str(tmp_path / "kept.tsv"))  # what `train --data` reads
    assert len(corpus) == s["kept"] and corpus.pairs[0].tgt_lang == "de"


def test_score_resumes_and_background_widens_neighbourhoods(tmp_path: Path, tiny_model_dir: Path) -> None:
    sents = _sentences(40)
    rows = [(s, s + " !") for s in sents[:30]]
    first = _score(tmp_path, tiny_model_dir, rows, config=ScoreConfig(threshold=1.0))
    again = _score(tmp_path, tiny_model_dir, rows, config=ScoreConfig(threshold=1.0))
    assert again["encoding"]["src"]["encoded"] == 0 and again["kept"] == first["kept"]
    bg = tmp_path / "bg.txt"
    bg.write_text("\n".join(sents[30:]) + "\n")
    s = _score(
        tmp_path, tiny_model_dir, rows, config=ScoreConfig(threshold=1.0), inputs={"background_tgt": [bg]}
    )
    assert s["background"] == {"src": 0, "tgt": 10, "dropped_as_in_bitext": {"src": 0, "tgt": 0}}


def test_bad_input_is_one_clear_error_or_a_counted_skip(tmp_path: Path, tiny_model_dir: Path) -> None:
    empty = tmp_path / "empty.tsv"
    empty.write_text("")
    with pytest.raises(CorpusFormatError, match="no pair to score"):
        score_bitext(ScoreInputs(str(empty), tgt_lang="de"), tmp_path / "o.tsv", str(tiny_model_dir))
    one_side = tmp_path / "one.tsv"
    one_side.write_text("hello world\t\n")
    with pytest.raises(CorpusFormatError, match="empty side"):
        score_bitext(ScoreInputs(str(one_side), tgt_lang="de"), tmp_path / "o.tsv", str(tiny_model_dir))
    mixed = tmp_path / "mixed.tsv"
    mixed.write_bytes(b"hello world\tcat dog\n\xff\xfe\tbad\ngood day\t" + b"one " * 400 + b"\n")
    with pytest.raises(CorpusFormatError, match="mixed.tsv:2"):
        score_bitext(ScoreInputs(str(mixed), tgt_lang="de"), tmp_path / "o.tsv", str(tiny_model_dir))
    s = score_bitext(
        ScoreInputs(str(mixed), tgt_lang="de", skip_bad_lines=True, max_chars=200),
        tmp_path / "o.tsv",
        str(tiny_model_dir),
        ScoreConfig(threshold=0.0),
    )
    assert "invalid utf-8 1" in s["read"] and s["too_long"] == 1 and s["kept"] == 1


def test_score_cli_flags(tmp_path: Path, tiny_model_dir: Path, capsys: pytest.CaptureFixture) -> None:
    parser = argparse.ArgumentParser()
    add_score_parser(parser.add_subparsers())
    rows = [(s, s + " !") for s in _sentences(20)]
    rows.append(rows[3])
    tsv = tmp_path / "b.tsv"
    tsv.write_text("".join(f"{a}\t{b}\n" for a, b in rows))
    out = tmp_path / "k.tsv"
    args = parser.parse_args(
        ["score", str(tsv), "--model", str(tiny_model_dir), "--out", str(out), "--tgt-lang", "de"]
        + ["--no-filter-identical", "--filter-length-ratio", "2", "--threshold", "0.5", "--no-progress"]
    )
    assert args.func(args) == 0
    printed = capsys.readouterr().out
    assert (
        "1 duplicates (flagged 1), 0 length_ratio (flagged 0)" in printed and "kept 20 of 21 rows" in printed
    )
    with pytest.raises(SystemExit):
        parser.parse_args(["score", str(tsv), "--model", "m", "--out", "o", "--filter-length-ratio", "0.5"])
