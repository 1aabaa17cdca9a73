"""Distance to the teacher on held-out pairs: the dev metric of multilingual knowledge distillation
(Reimers & Gurevych 2020, "Making Monolingual Sentence Embeddings Multilingual using Knowledge
Distillation", arXiv 2004.09813, §3).

Two conventions, named apart:

- :func:`mean_squared_l2`: the paper's, mean over pairs of ``||student_i - teacher_i||^2``.
- :func:`elementwise_mse_x100`: sentence-transformers' ``MSEEvaluator``, mean over every element of
  ``(student - teacher)^2``, times 100. It equals ``mean_squared_l2 / dim * 100``.

Teacher vectors are the teacher's encodings of the English side; student vectors are the student's
encodings of the translations (or of the English side, for the other half of the loss). Raw vectors,
no normalisation, exactly as trained.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class MseResult:
    """Both conventions on the same pairs."""

    mean_squared_l2: float
    elementwise_mse_x100: float
    n: int
    dim: int


def _check(student: np.ndarray, teacher: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    s = np.asarray(student, dtype=np.float64)
    t = np.asarray(teacher, dtype=np.float64)
    if s.shape != t.shape or s.ndim != 2:
        raise ValueError(
            f"student and teacher must be [n, dim] arrays of equal shape, got {s.shape} and {t.shape}"
        )
    return s, t


def mean_squared_l2(student: np.ndarray, teacher: np.ndarray) -> float:
    """Mean over pairs of the squared L2 distance (the paper's per-term loss)."""
    s, t = _check(student, teacher)
    return float(np.mean(np.sum((s - t) ** 2, axis=1))) if len(s) else 0.0


def elementwise_mse_x100(student: np.ndarray, teacher: np.ndarray) -> float:
    """Element-wise mean squared error x 100 (what sentence-transformers' ``MSEEvaluator`` reports)."""
    s, t = _check(student, teacher)
    return 100.0 * float(np.mean((s - t) ** 2)) if s.size else 0.0


def mse_to_teacher(student: np.ndarray, teacher: np.ndarray) -> MseResult:
    """Both conventions of the distance between ``student`` [n, d] and ``teacher`` [n, d] vectors."""
    s, t = _check(student, teacher)
    return MseResult(mean_squared_l2(s, t), elementwise_mse_x100(s, t), s.shape[0], s.shape[1])
