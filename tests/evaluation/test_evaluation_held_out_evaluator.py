"""The held-out table is an evaluator in sentence-transformers' ``TranslationEvaluator`` shape:
built with its sentences and baselines, called with a model, returning a metrics dict; what needs
the training config lives in ``training/output/final_table.py``, and evaluation takes no config."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import torch
from sentence_transformers import SentenceTransformer

from babelspace.evaluation.held_out import (
    CI_ROW,
    DROP_IN_COSINE,
    HeldOutEvaluator,
    baseline_columns,
    encode_texts,
    table_from_vectors,
)

EN = ["the king and the people", "god is good", "the city of the lord", "one day the rain"]
PER_LANG = {
    "de": ["der könig und das volk", "gott ist gut", "die stadt des herrn", "ein tag der regen"],
    "fr": ["le roi et le peuple", "dieu est bon", "la ville du seigneur", "un jour la pluie"],
}
PKG = Path(__file__).resolve().parents[2] / "src" / "babelspace"


def test_called_with_a_model_it_returns_the_table_as_metrics(tiny_model_dir) -> None:
    teacher = SentenceTransformer(str(tiny_model_dir), device="cpu")
    student = SentenceTransformer(str(tiny_model_dir), device="cpu")
    torch.manual_seed(0)
    with torch.no_grad():  # other weights of the same width: the teacher's space is another space
        for p in student.parameters():
            p.add_(0.5 * torch.randn_like(p))
    t_vecs, s_vecs = encode_texts(teacher, EN, PER_LANG, 8), encode_texts(student, EN, PER_LANG, 8)
    evaluator = HeldOutEvaluator(EN, PER_LANG, t_vecs[0], baseline_columns(t_vecs, s_vecs))
    rows = evaluator.table(student)
    raw = encode_texts(student, EN, PER_LANG, 8, normalize=False)
    assert rows == table_from_vectors(t_vecs, s_vecs, raw)  # the same table as from the vectors
    metrics = evaluator(student)
    assert [r["lang"] for r in rows] == ["de", "fr", "mean", CI_ROW]
    assert metrics["de/after xx>en"] == rows[0]["after xx>en"]
    assert metrics[evaluator.primary_metric] == rows[2]["after xx>T(en)"]
    assert metrics[DROP_IN_COSINE] == rows[2][DROP_IN_COSINE]
    assert all(isinstance(v, float) for v in metrics.values())


@pytest.mark.parametrize("module", ["held_out.py", "held_out_baselines.py"])
def test_evaluation_takes_no_config(module: str) -> None:
    """No ``cfg`` parameter (typed ``Any`` to get round evaluation -> training) in the table's modules."""
    tree = ast.parse((PKG / "evaluation" / module).read_text(encoding="utf-8"))
    params = [
        a.arg
        for f in ast.walk(tree)
        if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
        for a in [*f.args.args, *f.args.kwonlyargs]
    ]
    assert "cfg" not in params
