"""The closed-form fit of a student's linear projection on the distillation objective itself.

Ridge least squares over English sentences *and* their translations, both regressed onto the
teacher's vector of the English sentence, starts fine-tuning from a point that already lives in
the teacher's space instead of collapsing towards its mean vector. The projection is the linear
Dense that :func:`babelspace.models.encoder.projection_layer` finds; its inputs are what
:func:`babelspace.models.encoder.projection_inputs` computes.
"""

from __future__ import annotations

import numpy as np
import torch
from sentence_transformers import SentenceTransformer

from babelspace.errors import ResourceError
from babelspace.models.encoder import projection_layer

__all__ = ["DEFAULT_PROJECTION_RIDGE", "PROJECTION_PRIORS", "fit_projection"]


PROJECTION_PRIORS = ("procrustes", "zero")
DEFAULT_PROJECTION_RIDGE = {"procrustes": 1.0, "zero": 0.01}


def _full_rank_procrustes(cross: np.ndarray, prior_map: np.ndarray) -> np.ndarray:
    """The orthogonal Procrustes map of ``cross`` (``U V^T`` of its SVD) on the directions the data
    determines, completed on the rest by the orthogonal map closest to ``prior_map`` there.

    The completion is the polar factor of ``prior_map`` restricted to the two complements, which does
    not depend on the (arbitrary) basis of the null spaces, so the result is deterministic."""
    if prior_map.shape != cross.shape:
        raise ValueError(f"prior_map has shape {prior_map.shape}, expected {cross.shape}")
    u, sv, vt = np.linalg.svd(cross, full_matrices=True)
    k = min(cross.shape)
    keep = sv > sv.max() * 1e-6 if sv.size and sv.max() > 0 else np.zeros(k, dtype=bool)
    r = int(keep.sum())  # singular values are sorted: the determined directions come first
    rotation = u[:, :r] @ vt[:r]
    null_s, null_t = u[:, r:], vt[r:].T  # complements in the student and teacher spaces
    if null_s.shape[1] and null_t.shape[1]:
        a, _, bt = np.linalg.svd(null_s.T @ prior_map @ null_t, full_matrices=False)
        rotation = rotation + null_s @ (a @ bt) @ null_t.T
    return rotation


def _prior_weight(
    prior: str, ac: np.ndarray, bc: np.ndarray, cross: np.ndarray, prior_map: np.ndarray | None
) -> np.ndarray:
    """``W0`` of `fit_projection` from the centred inputs ``ac``, targets ``bc`` and ``cross`` =
    ``ac.T @ bc``: zeros, or the scaled full-rank Procrustes rotation."""
    if prior != "procrustes":
        return np.zeros_like(cross)
    rotation = _full_rank_procrustes(cross, np.eye(*cross.shape) if prior_map is None else prior_map)
    rotated = ac @ rotation
    scale = float(np.sum(rotated * bc) / max(np.sum(rotated * rotated), 1e-12))
    return scale * rotation


def fit_projection(
    model: SentenceTransformer,
    source_features: np.ndarray,
    target_features: np.ndarray,
    teacher_vectors: np.ndarray,
    ridge: float | None = None,
    teacher_shift: np.ndarray | None = None,
    prior: str = "zero",
    prior_map: np.ndarray | None = None,
    english_features: np.ndarray | None = None,
    english_vectors: np.ndarray | None = None,
) -> float:
    """Closed-form optimum of the distillation loss for the linear projection alone (a linear Dense:
    :func:`~babelspace.models.encoder.projection_layer`; a non-linear Dense is never fitted as if it were linear). The features
    are what the projection reads (:func:`~babelspace.models.encoder.projection_inputs`).

    Minimises ``sum_i ||W s_i + b - T_i||^2 + ||W t_i + b - T_i||^2 + ridge * m * ||W - W0||^2`` where
    ``s_i``/``t_i`` are the student's pooled vectors of the English sentence and its translation,
    ``T_i`` the teacher's vector of the English sentence (minus ``teacher_shift`` when given) and
    ``m`` the mean diagonal of the Gram matrix (uncentred for the zero prior, centred for the
    procrustes prior), so ``ridge`` is scale-free. The bias is
    not penalised. ``prior`` picks ``W0``:

    * ``"zero"`` (default; ridge 0.01): plain ridge regression.
    * ``"procrustes"`` (ridge 1.0): the scaled orthogonal map that best fits the same data.
      Directions the fit data does not constrain keep the student's own geometry (rotated), instead
      of being squashed to zero, which keeps the student's own retrieval on text unlike the fit data
      (docs/distillation.md, "Out of the Bible's domain"). With fewer fit rows than dimensions the
      rotation is completed to full rank: on the directions the data leaves open it is the
      orthogonal map closest to ``prior_map`` (default: the identity, ``np.eye(d_student,
      d_teacher)``, right when the student shares the teacher's space, e.g. a copy of it; any
      completion keeps the student's own geometry), so those directions are rotated, not zeroed.

    ``english_features`` / ``english_vectors``: English-only rows (features of an English sentence,
    the teacher's vector of it), each adding the first term ``||W e_j + b - E_j||^2`` once (the
    English sample of the fit, :mod:`babelspace.training.setup.english_fit`).

    Returns the training loss it reaches on the pairs (paper reduction: mean over pairs of the two
    squared distances summed)."""
    dense = projection_layer(model)
    if dense is None:
        raise ResourceError("student has no linear projection layer to fit (use projection='always')")
    if prior not in PROJECTION_PRIORS:
        raise ValueError(f"prior must be one of {PROJECTION_PRIORS}, not {prior!r}")
    if ridge is None:
        ridge = DEFAULT_PROJECTION_RIDGE[prior]
    a_rows, b_rows = [source_features, target_features], [teacher_vectors, teacher_vectors]
    if english_features is not None and len(english_features):
        if english_vectors is None or len(english_vectors) != len(english_features):
            raise ValueError("english_features needs one teacher vector per row (english_vectors)")
        a_rows.append(english_features)
        b_rows.append(english_vectors)
    a = np.vstack(a_rows).astype(np.float64)
    b = np.vstack(b_rows).astype(np.float64)
    if teacher_shift is not None:
        b -= np.asarray(teacher_shift, dtype=np.float64)
    a_mean, b_mean = a.mean(0), b.mean(0)
    ac, bc = a - a_mean, b - b_mean
    gram = ac.T @ ac
    cross = ac.T @ bc
    # ``m``: mean squared feature (uncentred) for the zero prior, as in the measured default runs;
    # mean variance (centred) for the procrustes prior, as measured in docs/distillation.md.
    m = float(np.mean(np.sum(a * a, axis=0))) if prior == "zero" else float(np.mean(np.diag(gram)))
    strength = ridge * m
    w0 = _prior_weight(prior, ac, bc, cross, prior_map)
    w = np.linalg.solve(gram + strength * np.eye(gram.shape[0]), cross + strength * w0)
    bias = b_mean - a_mean @ w
    with torch.no_grad():
        dense.linear.weight.copy_(torch.from_numpy(w.T).float())
        dense.linear.bias.copy_(torch.from_numpy(bias).float())
    n = len(source_features)
    resid = a[: 2 * n] @ w + bias - b[: 2 * n]
    return float((resid**2).sum() / n)
