"""The closed-form projection fit lives in its own module beside the encoder, and only there."""

from __future__ import annotations

import numpy as np
from sentence_transformers import SentenceTransformer

from babelspace.models import encoder
from babelspace.models.encoder import make_student, pooled_encoder, projection_layer
from babelspace.models.projection_fit import fit_projection


def test_the_fit_is_not_in_the_encoder_module() -> None:
    assert not {"fit_projection", "PROJECTION_PRIORS", "DEFAULT_PROJECTION_RIDGE"} & set(vars(encoder))


def test_a_fit_at_ridge_zero_reaches_the_least_squares_optimum(tiny_model_dir, tiny_teacher_dir) -> None:
    teacher = SentenceTransformer(str(tiny_teacher_dir), device="cpu")
    student = make_student(str(tiny_model_dir), teacher, projection="always")
    texts = [f"sentence number {i}" for i in range(40)]
    s = pooled_encoder(student).encode(texts, convert_to_numpy=True)
    t = teacher.encode(texts, convert_to_numpy=True)
    loss = fit_projection(student, s, s, t, ridge=0.0)
    a = np.hstack([s, np.ones((len(s), 1))]).astype(np.float64)
    sol, *_ = np.linalg.lstsq(a, t.astype(np.float64), rcond=None)
    best = 2 * float(((a @ sol - t) ** 2).sum()) / len(s)
    dense = projection_layer(student).linear
    w = np.vstack([dense.weight.detach().numpy().T, dense.bias.detach().numpy()[None]]).astype(np.float64)
    assert abs(loss - best) < 1e-3 * max(best, 1.0)
    assert abs(2 * float(((a @ w - t) ** 2).sum()) / len(s) - best) < 1e-3 * max(best, 1.0)
