"""The teacher-space contrastive term ranked in the exported space (``--teacher-contrast-space
exported``): student + teacher mean against raw teacher vectors, as the exported model is queried."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sentence_transformers import SentenceTransformer

from babelspace.data.pairs import ParallelPair
from babelspace.models.encoder import make_student
from babelspace.objectives.distillation import DistillationObjective, teacher_contrastive_loss
from babelspace.training.config import TrainConfig
from babelspace.training.setup.factory import build_objective
from babelspace.training.setup.phases import TeacherTargets

PAIRS = [
    ParallelPair("the king", "der könig", "en", "de", "t:1"),
    ParallelPair("a house", "ein haus", "en", "de", "t:2"),
    ParallelPair("the rain", "der regen", "en", "de", "t:3"),
]


def _setup(tiny_model_dir, tiny_teacher_dir):
    teacher = SentenceTransformer(str(tiny_teacher_dir), device="cpu")
    student = make_student(str(tiny_model_dir), teacher, projection="auto")
    student.eval()  # no dropout: every forward pass gives the same vectors
    rng = np.random.default_rng(0)
    raw = {p.src: rng.normal(size=48).astype(np.float32) for p in PAIRS}
    raw_bank = rng.normal(size=(6, 48)).astype(np.float32)
    mu = np.float32(3.0) * rng.normal(size=48).astype(np.float32)  # a large common component
    return student, raw, raw_bank, mu


def test_contrast_in_exported_space_ranks_raw_vectors(tiny_model_dir, tiny_teacher_dir) -> None:
    student, raw, raw_bank, mu = _setup(tiny_model_dir, tiny_teacher_dir)
    look = lambda texts: np.stack([raw[t] for t in texts])  # noqa: E731
    common = {"teacher_shift": mu, "contrast_weight": 1.0, "contrast_bank": raw_bank - mu}
    exported = DistillationObjective(student, look, contrast_offset=mu, **common)
    centred = DistillationObjective(student, look, **common)
    assert "contrast_offset" in exported.state_dict()  # checkpoints carry it
    with torch.no_grad():
        got = exported(exported.collate(PAIRS))
        ref = centred(centred.collate(PAIRS))
        # by hand: the exported model's vectors (student + mu) against the raw teacher vectors
        s = student.encode([p.src for p in PAIRS], convert_to_tensor=True) + torch.from_numpy(mu)
        x = student.encode([p.tgt for p in PAIRS], convert_to_tensor=True) + torch.from_numpy(mu)
        t, bank = torch.from_numpy(look([p.src for p in PAIRS])), torch.from_numpy(raw_bank)
        want_s = teacher_contrastive_loss(s, t, bank).item()
        want_t = teacher_contrastive_loss(x, t, bank).item()
    assert got["nce_source"].item() == pytest.approx(want_s, rel=1e-4)
    assert got["nce_target"].item() == pytest.approx(want_t, rel=1e-4)
    # the MSE does not depend on the space (a shift of both sides); the contrastive term does
    assert got["mse_source"].item() == pytest.approx(ref["mse_source"].item(), rel=1e-5)
    assert abs(got["nce_source"].item() - ref["nce_source"].item()) > 1e-3


@pytest.mark.parametrize(
    ("contrast_space", "export_space", "offset"),
    [("exported", "teacher", True), ("centred", "teacher", False), ("exported", "centred", False)],
)
def test_factory_offsets_the_term_only_for_a_raw_space_export(
    tiny_model_dir, tiny_teacher_dir, contrast_space: str, export_space: str, offset: bool
) -> None:
    student, raw, raw_bank, mu = _setup(tiny_model_dir, tiny_teacher_dir)
    cfg = TrainConfig(teacher_contrast_space=contrast_space, export_space=export_space)
    cache = type("Cache", (), {"lookup": staticmethod(lambda texts: np.stack([raw[t] for t in texts]))})()
    obj = build_objective(cfg, student, TeacherTargets(cache=cache, shift=mu, bank=raw_bank - mu, radius=0.8))
    assert obj.contrast_offset.numel() == (48 if offset else 0)
    assert obj.contrast_radius == (0.8 if offset else None)
    if offset:
        assert torch.equal(obj.contrast_offset, torch.from_numpy(mu))


def test_output_map_gives_the_centred_part_the_teacher_norm() -> None:
    from babelspace.models.output_map import OutputMap, teacher_radius

    rng = np.random.default_rng(1)
    c, mu = rng.normal(size=(5, 8)).astype(np.float32), rng.normal(size=8).astype(np.float32)
    out = OutputMap(shift=mu, radius=0.7).apply(c)
    np.testing.assert_allclose(np.linalg.norm(out - mu, axis=1), 0.7, rtol=1e-5)
    np.testing.assert_allclose(
        OutputMap(shift=mu, radius=0.7).apply_torch(torch.from_numpy(c)).numpy(), out, atol=1e-6
    )
    np.testing.assert_allclose(OutputMap(shift=mu).apply(c), c + mu)
    assert OutputMap().identity and not OutputMap(radius=1.0).identity
    unit = np.array([[0.6, 0.8], [0.0, 1.0]])  # mean (0.3, 0.9): r^2 = 1 - |mean|^2 = 0.1
    assert teacher_radius(unit, unit.mean(0)) == pytest.approx(np.sqrt(0.1))
    with pytest.raises(ValueError, match="unit-norm"):
        teacher_radius(np.array([[3.0, 4.0], [0.0, 1.0]]), np.zeros(2))
    with pytest.raises(ValueError, match="radius"):
        OutputMap(radius=0.0)


def test_teacher_norm_undoes_the_hub_bias_of_shrunk_queries() -> None:
    """Raw cosine queries whose centred part is shrunk land on the teacher vector nearest the mean;
    with the centred part at the teacher's norm they find their own."""
    from babelspace.metrics.tatoeba import top1_accuracy
    from babelspace.models.output_map import OutputMap

    mu = np.array([0.0, 0.0, 0.0, 0.6], dtype=np.float32)
    centred = np.array([[0.8, 0, 0, 0], [0, 0.8, 0, 0], [0, 0, 0.8, 0], [0, 0, 0, 0.3]], dtype=np.float32)
    teacher = centred + mu
    teacher /= np.linalg.norm(teacher, axis=1, keepdims=True)  # unit-norm teacher vectors
    centred = teacher - mu
    shrunk = 0.3 * centred + 0.05  # a regression's prediction: shorter, and a little off
    radius = float(np.sqrt((centred**2).sum(1).mean()))
    assert top1_accuracy(OutputMap(shift=mu).apply(shrunk), teacher) < 100.0  # the hub wins some
    assert top1_accuracy(OutputMap(shift=mu, radius=radius).apply(shrunk), teacher) == 100.0


def test_contrast_with_radius_ranks_the_exported_vectors(tiny_model_dir, tiny_teacher_dir) -> None:
    student, raw, raw_bank, mu = _setup(tiny_model_dir, tiny_teacher_dir)
    look = lambda texts: np.stack([raw[t] for t in texts])  # noqa: E731
    obj = DistillationObjective(
        student,
        look,
        teacher_shift=mu,
        contrast_weight=1.0,
        contrast_bank=raw_bank - mu,
        contrast_offset=mu,
        contrast_radius=0.5,
    )
    with torch.no_grad():
        got = obj(obj.collate(PAIRS))
        s = student.encode([p.src for p in PAIRS], convert_to_tensor=True)
        s = 0.5 * torch.nn.functional.normalize(s, dim=-1) + torch.from_numpy(mu)
        t = torch.from_numpy(look([p.src for p in PAIRS]))
        want = teacher_contrastive_loss(s, t, torch.from_numpy(raw_bank)).item()
    assert got["nce_source"].item() == pytest.approx(want, rel=1e-4)
    with pytest.raises(ValueError, match="radius"):
        DistillationObjective(student, look, contrast_radius=-1.0)
