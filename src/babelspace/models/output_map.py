"""What the exported model applies to the student's output in the mean-centred teacher space.

A student distilled onto centred teacher targets ``T - mu`` outputs ``c``. Exported in the teacher's
raw space (``--export-space teacher``) it outputs ``c + mu``, or with ``--export-norm teacher``
``mu + r · c / |c|``: every vector's centred part gets the teacher's RMS distance ``r`` from its
mean (measured on the fit sample). Why: with unit-norm teacher vectors, cosine ranking of a raw
query ``q`` against the teacher's vectors ``T_j`` is Euclidean nearest neighbour in the centred
space, argmax_j  q_c · (T_j - mu) - ½ |T_j - mu|², so a query whose centred part is shorter than the
teacher's (a regression's shrunk prediction) favours candidates near the mean (hubs; Radovanović
et al. 2010, "Hubs in space", JMLR 11). Giving every query the teacher's typical centred norm
removes that shrinkage per query (docs/distillation.md, "The exported space").

The derivation needs unit-norm teacher vectors ``T_j``, and it has them for every teacher: the
teacher targets are the L2-normalised teacher outputs (the teacher cache normalises them whether or
not the teacher ends in a ``Normalize`` module), ``mu`` is their mean and ``r`` their RMS centred
norm, ``r² = 1 − |mu|²`` (:func:`teacher_radius` refuses vectors that are not unit-norm). A cosine
query ignores the norms of the vectors it ranks, so against a teacher without ``Normalize`` the
ranking is the same as against its normalised vectors. What does not carry over to such a teacher:
the exported vectors reproduce its normalised vectors, not its raw ones, so a dot product or a
Euclidean distance to its raw vectors is not what was trained.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch


@dataclass(frozen=True)
class OutputMap:
    """``shift + radius · c / |c|`` (``radius`` None: ``shift + c``; ``shift`` None: no shift)."""

    shift: np.ndarray | None = None
    radius: float | None = None

    def __post_init__(self) -> None:
        if self.radius is not None and not (np.isfinite(self.radius) and self.radius > 0):
            raise ValueError(f"the export radius must be finite and > 0, not {self.radius}")

    @property
    def identity(self) -> bool:
        return self.shift is None and self.radius is None

    def apply(self, vectors: np.ndarray) -> np.ndarray:
        """The map on an array of the student's vectors ``[n, d]``."""
        out = vectors
        if self.radius is not None:
            norms = np.linalg.norm(out, axis=1, keepdims=True)
            out = self.radius * out / np.maximum(norms, 1e-12)
        return out if self.shift is None else out + self.shift

    def apply_torch(self, vectors: torch.Tensor) -> torch.Tensor:
        """The same map on a tensor, differentiable (the training loss sees the exported vectors)."""
        out = vectors
        if self.radius is not None:
            out = self.radius * torch.nn.functional.normalize(out, dim=-1, eps=1e-12)
        if self.shift is not None:
            out = out + torch.as_tensor(self.shift, dtype=out.dtype, device=out.device)
        return out


#: How far from 1 a teacher target's norm may be (float32 storage) for the radius map.
UNIT_NORM_TOLERANCE = 1e-3


def teacher_radius(teacher: np.ndarray, shift: np.ndarray) -> float:
    """RMS norm of the teacher's vectors ``[n, d]`` (one row per fit pair) centred on ``shift``; a
    ValueError unless the vectors are unit-norm (the map's derivation, module docstring)."""
    t = np.asarray(teacher, dtype=np.float64)
    norms = np.linalg.norm(t, axis=1)
    if len(t) == 0 or np.abs(norms - 1.0).max() > UNIT_NORM_TOLERANCE:
        raise ValueError(
            "the teacher-radius export is derived for unit-norm teacher vectors; these have norms "
            f"{norms.min() if len(t) else 0:.4g} to {norms.max() if len(t) else 0:.4g} (normalise them first)"
        )
    return float(np.sqrt(((t - shift) ** 2).sum(1).mean()))
