"""Students that end in their own non-linear Dense (LaBSE's tanh Dense): the export adds the teacher
mean through an identity Dense (a bias shift before tanh would change the output non-linearly), and
the closed-form projection fit touches only a linear layer."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from sentence_transformers import SentenceTransformer
from sentence_transformers.sentence_transformer.modules import Dense, Normalize

from babelspace.models.encoder import (
    encode,
    is_linear_dense,
    make_student,
    projection_inputs,
    projection_layer,
)
from babelspace.models.output_map import OutputMap
from babelspace.models.projection_fit import fit_projection
from babelspace.training.config import TrainConfig
from babelspace.training.output.export import export_student, mapped

TEXTS = ["the king of the land", "god is good", "one day with the lord", "der hund", "a big cat sits"]


def _tanh_student(tiny_model_dir: Path, normalize: bool = False) -> SentenceTransformer:
    """The tiny model with LaBSE's head: [Transformer, Pooling, Dense(tanh), (Normalize)]."""
    base = SentenceTransformer(str(tiny_model_dir), device="cpu")
    torch.manual_seed(0)
    dense = Dense(32, 32, bias=True, activation_function=torch.nn.Tanh())
    modules = [base[0], base[1], dense, *([Normalize()] if normalize else [])]
    return SentenceTransformer(modules=modules, device="cpu")


def test_export_adds_the_mean_after_a_tanh_dense(tiny_model_dir: Path, tmp_path: Path) -> None:
    student = _tanh_student(tiny_model_dir)
    student.eval()
    before = encode(student, TEXTS, normalize=False)
    assert np.abs(before).max() < 1.0  # tanh outputs
    mean = np.random.default_rng(0).normal(size=32).astype(np.float32) * 3.0
    tanh_bias = student[2].linear.bias.detach().clone()
    with mapped(student, OutputMap(shift=mean)) as view:
        shifted_out = encode(view, TEXTS, normalize=False)
        assert is_linear_dense(list(view)[-1]) and not is_linear_dense(list(view)[-2])
    np.testing.assert_allclose(shifted_out, before + mean, atol=1e-5)
    assert torch.equal(student[2].linear.bias, tanh_bias)  # the tanh layer is untouched
    np.testing.assert_allclose(encode(student, TEXTS, normalize=False), before, atol=1e-6)
    # the exported folder loads with plain sentence-transformers and encodes student + mean
    cfg = TrainConfig(output=tmp_path / "out")
    export_student(student, cfg, {"step": 0}, output_map=OutputMap(shift=mean))
    exported = SentenceTransformer(str(tmp_path / "out"), device="cpu")
    np.testing.assert_allclose(encode(exported, TEXTS, normalize=False), before + mean, atol=1e-5)


def test_export_still_shifts_a_linear_projection_in_place(tiny_model_dir: Path) -> None:
    student = _tanh_student(tiny_model_dir)
    student[2].activation_function = torch.nn.Identity()  # now a linear projection
    before = encode(student, TEXTS, normalize=False)
    mean = np.full(32, 0.5, dtype=np.float32)
    with mapped(student, OutputMap(shift=mean)) as view:
        assert view is student and len(list(view)) == 3  # no layer added: the bias moved
        np.testing.assert_allclose(encode(view, TEXTS, normalize=False), before + mean, atol=1e-5)
    np.testing.assert_allclose(encode(student, TEXTS, normalize=False), before, atol=1e-6)


def test_projection_fit_only_on_a_linear_layer_after_the_tanh_dense(
    tiny_model_dir: Path, tiny_teacher_dir: Path
) -> None:
    teacher = SentenceTransformer(str(tiny_teacher_dir), device="cpu")  # 48-d
    tanh_student = _tanh_student(tiny_model_dir, normalize=True)
    assert projection_layer(tanh_student) is None  # a tanh Dense is not a projection
    student = make_student(tanh_student, teacher, projection="always", drop_normalize=True)
    kinds = [type(m).__name__ for m in student]
    assert kinds == ["Transformer", "Pooling", "Dense", "Dense"]
    assert not is_linear_dense(student[2]) and projection_layer(student) is student[3]
    tanh_weight = student[2].linear.weight.detach().clone()
    inputs = projection_inputs(student)
    src, tgt = encode(inputs, TEXTS, normalize=False), encode(inputs, TEXTS[::-1], normalize=False)
    assert np.abs(src).max() < 1.0  # the projection reads the tanh outputs
    target = encode(teacher, TEXTS, normalize=False)
    loss = fit_projection(student, src, tgt, target)
    assert torch.equal(student[2].linear.weight, tanh_weight)  # the tanh layer is not refitted
    out_s = encode(student, TEXTS, normalize=False)
    out_t = encode(student, TEXTS[::-1], normalize=False)
    reached = float((((out_s - target) ** 2).sum(1) + ((out_t - target) ** 2).sum(1)).mean())
    assert abs(reached - loss) < 1e-3 * max(1.0, loss)
