"""The teacher-radius export (``mu + r · c/|c|``) on a teacher without a ``Normalize`` module: the
map is derived for unit-norm teacher vectors, and the teacher targets are unit-norm whatever the
teacher's last module, so cosine queries against the raw teacher rank as the derivation says."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from sentence_transformers import SentenceTransformer
from sentence_transformers.sentence_transformer.modules import Normalize

from babelspace.models.output_map import OutputMap, teacher_radius
from babelspace.training.setup.teacher_cache import TeacherCache

TEXTS = ["the king", "a house", "the rain today", "one big dog", "good cat sits", "two small mats"]


def _without_normalize(tiny_teacher_dir: Path) -> SentenceTransformer:
    full = SentenceTransformer(str(tiny_teacher_dir), device="cpu")
    model = SentenceTransformer(modules=[m for m in full if not isinstance(m, Normalize)], device="cpu")
    assert not any(isinstance(m, Normalize) for m in model)
    return model


def test_targets_of_a_teacher_without_normalize_are_unit_norm(tiny_teacher_dir: Path, tmp_path: Path) -> None:
    teacher = _without_normalize(tiny_teacher_dir)
    raw = teacher.encode(TEXTS, convert_to_numpy=True)
    assert np.abs(np.linalg.norm(raw, axis=1) - 1).max() > 0.1  # its own outputs are not unit-norm
    cache = TeacherCache(teacher, "tiny-no-normalize", tmp_path)
    cache.ensure(TEXTS)
    targets = cache.lookup(TEXTS)
    np.testing.assert_allclose(np.linalg.norm(targets, axis=1), 1.0, atol=1e-5)
    mu = targets.mean(0)
    # the export radius of the training code: r^2 = 1 - |mu|^2, as for any unit-norm teacher
    assert teacher_radius(targets, mu) == pytest.approx(np.sqrt(1 - mu @ mu), rel=1e-5)
    with pytest.raises(ValueError, match="unit-norm"):
        teacher_radius(raw, raw.mean(0))  # the raw outputs are not what the map is derived for


def test_radius_export_ranks_a_raw_teacher_as_the_centred_space(tiny_teacher_dir: Path) -> None:
    """Cosine ranking of an exported query ``mu + r·c/|c|`` against the *raw* vectors of a teacher
    without Normalize equals nearest-neighbour ranking of ``r·c/|c|`` among the centred normalised
    teacher vectors (the map's derivation), for every query."""
    raw = _without_normalize(tiny_teacher_dir).encode(TEXTS, convert_to_numpy=True).astype(np.float64)
    unit = raw / np.linalg.norm(raw, axis=1, keepdims=True)
    mu = unit.mean(0)
    r = teacher_radius(unit, mu)
    queries = np.random.default_rng(0).normal(size=(50, raw.shape[1]))
    exported = OutputMap(shift=mu, radius=r).apply(queries)
    cos = (exported / np.linalg.norm(exported, axis=1, keepdims=True)) @ (unit.T)
    cos_raw = exported @ raw.T / np.outer(np.linalg.norm(exported, axis=1), np.linalg.norm(raw, axis=1))
    centred_q = exported - mu
    dist = ((centred_q[:, None, :] - (unit - mu)[None]) ** 2).sum(-1)
    np.testing.assert_allclose(cos_raw, cos, atol=1e-9)
    assert (cos_raw.argsort(1)[:, ::-1] == dist.argsort(1)).all()
