from __future__ import annotations

import numpy as np
import pytest
import torch
from sentence_transformers import SentenceTransformer

from babelspace.data.pairs import ParallelPair
from babelspace.models.encoder import embedding_dim, make_student, pooled_encoder, projection_layer
from babelspace.models.projection_fit import fit_projection
from babelspace.objectives.distillation import (
    DistillationObjective,
    distillation_loss,
    teacher_contrastive_loss,
)
from babelspace.training.setup.teacher_cache import TeacherCache


def test_loss_matches_hand_computation_both_reductions() -> None:
    t = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    s = torch.tensor([[1.0, 1.0], [0.0, 0.0]])  # sq dists: 1, 1
    x = torch.tensor([[3.0, 0.0], [0.0, 3.0]])  # sq dists: 4, 4
    out = distillation_loss(t, s, x, "paper")
    assert out["loss"].item() == pytest.approx(((1 + 4) + (1 + 4)) / 2)
    assert out["mse_source"].item() == pytest.approx(1.0)
    assert out["mse_target"].item() == pytest.approx(4.0)
    ew = distillation_loss(t, s, x, "elementwise")
    # sentence-transformers' MSELoss: mean over every element of both differences
    ref = torch.nn.functional.mse_loss(torch.cat([s, x]), torch.cat([t, t])).item()
    assert ew["loss"].item() == pytest.approx(ref)
    assert ew["loss"].item() == pytest.approx(out["loss"].item() / (2 * 2))
    with pytest.raises(ValueError):
        distillation_loss(t, s, x, "sum")


def test_teacher_contrastive_term_matches_hand_computation() -> None:
    teacher = torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    bank = torch.tensor([[0.0, 0.0, 2.0], [3.0, 0.0, 0.0]])  # bank row 1 is rows 0 and 2's sentence
    student = torch.tensor([[0.6, 0.8, 0.0], [0.0, 1.0, 1.0], [1.0, 0.0, 0.0]])
    scale = 10.0
    got = teacher_contrastive_loss(student, teacher, bank, scale).item()

    def cos(a: torch.Tensor, b: torch.Tensor) -> float:
        return float(a @ b / (a.norm() * b.norm()))

    # each row: its positive against the bank rows that are not its own sentence
    allowed = {0: [0], 1: [0, 1], 2: [0]}
    ce = []
    for i, cols in allowed.items():
        pos = scale * cos(student[i], teacher[i])
        negs = [scale * cos(student[i], bank[k]) for k in cols]
        ce.append(np.log(np.exp(pos) + sum(np.exp(n) for n in negs)) - pos)
    assert got == pytest.approx(float(np.mean(ce)), rel=1e-5)
    # rows are independent: the mean over a split batch equals the whole batch (DDP-safe)
    halves = [
        teacher_contrastive_loss(student[a:b], teacher[a:b], bank, scale).item() for a, b in [(0, 1), (1, 3)]
    ]
    assert got == pytest.approx((halves[0] + 2 * halves[1]) / 3, rel=1e-5)
    # a student that matches its teacher vectors beats one pointing at another sentence
    good = teacher_contrastive_loss(teacher * 5, teacher, bank, scale).item()
    bad = teacher_contrastive_loss(torch.tensor([[0.0, 0.0, 1.0]] * 3), teacher, bank, scale).item()
    assert good < 1e-3 < 1.0 < bad


def test_objective_adds_weighted_contrastive_terms(tiny_model_dir, tiny_teacher_dir) -> None:
    teacher = SentenceTransformer(str(tiny_teacher_dir), device="cpu")
    student = make_student(str(tiny_model_dir), teacher, projection="auto")
    pairs = [
        ParallelPair("the king", "der könig", "en", "de", "t:1"),
        ParallelPair("a house", "ein haus", "en", "de", "t:2"),
    ]
    vec = {p.src: np.random.default_rng(i).normal(size=48).astype(np.float32) for i, p in enumerate(pairs)}
    bank = np.random.default_rng(9).normal(size=(5, 48)).astype(np.float32)
    look = lambda texts: np.stack([vec[t] for t in texts])  # noqa: E731
    plain = DistillationObjective(student, look)
    mixed = DistillationObjective(student, look, contrast_weight=0.5, contrast_bank=bank, contrast_scale=20.0)
    assert torch.equal(mixed.contrast_bank, torch.from_numpy(bank))
    assert "contrast_bank" in mixed.state_dict()  # checkpoints carry the bank
    student.eval()  # no dropout: both objectives see the same vectors
    with torch.no_grad():
        a = plain(plain.collate(pairs))
        b = mixed(mixed.collate(pairs))
    assert "nce_source" not in a
    expected = a["loss"] + 0.5 * (b["nce_source"] + b["nce_target"])
    assert b["loss"].item() == pytest.approx(expected.item(), rel=1e-5)
    assert b["nce_source"].item() > 0 and b["nce_target"].item() > 0
    with pytest.raises(ValueError, match="bank"):
        DistillationObjective(student, look, contrast_weight=1.0)
    with pytest.raises(ValueError, match=">= 0"):
        DistillationObjective(student, look, contrast_weight=-1.0, contrast_bank=bank)


def test_objective_on_tiny_models_backpropagates(tiny_model_dir, tiny_teacher_dir) -> None:
    teacher = SentenceTransformer(str(tiny_teacher_dir), device="cpu")
    student = make_student(str(tiny_model_dir), teacher, projection="auto")
    assert projection_layer(student) is not None  # 32-d student, 48-d teacher
    assert embedding_dim(student) == 48
    pairs = [
        ParallelPair("the king", "der könig", "en", "de", "t:1"),
        ParallelPair("a house", "ein haus", "en", "de", "t:2"),
    ]
    vec = {p.src: np.random.default_rng(i).normal(size=48).astype(np.float32) for i, p in enumerate(pairs)}
    obj = DistillationObjective(student, lambda texts: np.stack([vec[t] for t in texts]))
    out = obj(obj.collate(pairs))
    # the same value computed by hand from separate forward passes
    s = student.encode([p.src for p in pairs], convert_to_tensor=True)
    x = student.encode([p.tgt for p in pairs], convert_to_tensor=True)
    t = torch.from_numpy(np.stack([vec[p.src] for p in pairs]))
    expected = (((s - t) ** 2).sum(1) + ((x - t) ** 2).sum(1)).mean().item()
    assert out["loss"].item() == pytest.approx(expected, rel=1e-4)
    out["loss"].backward()
    grads = [p.grad for p in projection_layer(student).parameters()]
    assert all(g is not None and torch.count_nonzero(g) > 0 for g in grads)


def test_teacher_cache_hits_on_second_run(tiny_teacher_dir, tmp_path) -> None:
    teacher = SentenceTransformer(str(tiny_teacher_dir), device="cpu")
    texts = ["the king", "a house", "the king", "hello world"]
    first = TeacherCache(teacher, str(tiny_teacher_dir), tmp_path)
    assert first.ensure(texts) == 3
    v1 = first.lookup(texts)

    second = TeacherCache(teacher, str(tiny_teacher_dir), tmp_path)
    assert len(second) == 3
    calls = []
    original = teacher.encode
    teacher.encode = lambda *a, **k: calls.append(a) or original(*a, **k)  # type: ignore[method-assign]
    assert second.ensure(texts) == 0
    v2 = second.lookup(texts)
    assert calls == []  # teacher never re-encoded
    np.testing.assert_array_equal(v1, v2)
    np.testing.assert_allclose(v1[0], teacher.encode(["the king"], normalize_embeddings=True)[0], atol=1e-6)
    assert second.ensure(["one more"]) == 1  # only the new text is encoded


def _projection_problem(tiny_model_dir, tiny_teacher_dir, seed: int, n: int):  # type: ignore[no-untyped-def]
    """A 32-d student with a projection to the 48-d teacher, and pooled features ``s`` (English),
    ``x`` (translations: ``s`` plus 0.01 noise) with targets ``t = s @ w_true + 0.5``."""
    teacher = SentenceTransformer(str(tiny_teacher_dir), device="cpu")
    student = make_student(str(tiny_model_dir), teacher, projection="always")
    rng = np.random.default_rng(seed)
    w_true = rng.normal(size=(32, 48))
    s = rng.normal(size=(n, 32))
    x = s + 0.01 * rng.normal(size=s.shape)
    return student, w_true, s, x, s @ w_true + 0.5


def test_projection_fit_is_least_squares_optimum(tiny_model_dir, tiny_teacher_dir) -> None:
    student, w_true, s, x, t = _projection_problem(tiny_model_dir, tiny_teacher_dir, seed=0, n=200)
    loss = fit_projection(student, s, x, t, ridge=0.0)  # either prior: no pull at ridge 0
    # only the 0.01 noise on the translation side is left unexplained (~0.15 for 48 x 32 unit weights)
    assert loss < 0.2
    dense = projection_layer(student)
    np.testing.assert_allclose(dense.linear.weight.detach().numpy().T, w_true, atol=0.05)
    np.testing.assert_allclose(dense.linear.bias.detach().numpy(), 0.5, atol=0.05)
    # pooled view shares weights with the student and stops before the projection
    assert embedding_dim(pooled_encoder(student)) == 32


def test_projection_fit_procrustes_prior(tiny_model_dir, tiny_teacher_dir) -> None:
    student, _, s, x, t = _projection_problem(tiny_model_dir, tiny_teacher_dir, seed=1, n=300)
    dense = projection_layer(student)

    def weight() -> np.ndarray:
        return dense.linear.weight.detach().numpy().T.astype(np.float64)

    # a very strong prior gives the scaled orthogonal map: W W^T = scale^2 * I
    fit_projection(student, s, x, t, ridge=1e6, prior="procrustes")
    gram = weight() @ weight().T
    scale2 = float(np.mean(np.diag(gram)))
    np.testing.assert_allclose(gram / scale2, np.eye(32), atol=1e-3)
    # ...and its bias still centres the fit (not penalised)
    pred = np.vstack([s, x]) @ weight() + dense.linear.bias.detach().numpy()
    np.testing.assert_allclose(pred.mean(0), t.mean(0), atol=1e-3)
    # the zero prior with a very strong ridge squashes the map instead
    fit_projection(student, s, x, t, ridge=1e6, prior="zero")
    assert np.abs(weight()).max() < 1e-3
    # the procrustes prior at its default strength fits these clean data almost exactly
    loss = fit_projection(student, s, x, t, prior="procrustes")
    assert loss < 0.05 * float(((t - t.mean(0)) ** 2).sum(1).mean() * 2)
    with pytest.raises(ValueError, match="prior"):
        fit_projection(student, s, x, t, prior="identity")
