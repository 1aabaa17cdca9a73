"""Multilingual knowledge distillation (Reimers & Gurevych 2020, arXiv 2004.09813, §2).

A fixed English teacher M and a multilingual student M̂. For a batch of pairs (s_i, t_i), t_i a
translation of s_i, the loss is

    1/B · Σ_i ( ||M(s_i) − M̂(s_i)||² + ||M(s_i) − M̂(t_i)||² )          (reduction="paper", default)

sentence-transformers' ``MSELoss`` instead averages every element of both differences, which is the
paper's value divided by 2·d (reduction="elementwise").

=================  ==========================================================
Inputs             parallel pairs (English source, translation); teacher vectors
                   of the sources (precomputed once, see :class:`TeacherCache`)
Outputs            ``loss``, ``mse_source``, ``mse_target`` (per-pair squared distances)
=================  ==========================================================

Example::

    objective = DistillationLoss(student, teacher_vectors=cache.lookup)
    batch = objective.collate(pairs)
    out = objective(batch); out["loss"].backward()
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from sentence_transformers import SentenceTransformer

from babelspace.data.pairs import ParallelPair
from babelspace.objectives.base import Objective

REDUCTIONS = ("paper", "elementwise")


def distillation_loss(
    teacher: torch.Tensor,
    student_source: torch.Tensor,
    student_target: torch.Tensor,
    reduction: str = "paper",
) -> dict[str, torch.Tensor]:
    """The loss on already-computed vectors ([B, d] each)."""
    if reduction not in REDUCTIONS:
        raise ValueError(f"reduction must be one of {REDUCTIONS}, not {reduction!r}")
    d_src = ((student_source - teacher) ** 2).sum(dim=1)
    d_tgt = ((student_target - teacher) ** 2).sum(dim=1)
    if reduction == "paper":
        loss = (d_src + d_tgt).mean()
    else:
        loss = torch.cat([d_src, d_tgt]).mean() / teacher.shape[1]
    return {"loss": loss, "mse_source": d_src.mean().detach(), "mse_target": d_tgt.mean().detach()}


class DistillationLoss(Objective):
    """Pull the student's vectors of an English sentence and of its translation onto the teacher's
    vector of the English sentence. ``teacher_vectors`` maps a list of English texts to a float32
    array (a :class:`~babelspace.training.teacher_cache.TeacherCache` lookup)."""

    name = "distill"

    def __init__(
        self,
        student: SentenceTransformer,
        teacher_vectors: Callable[[Sequence[str]], np.ndarray],
        reduction: str = "paper",
        max_seq_length: int | None = None,
        teacher_shift: np.ndarray | None = None,
    ) -> None:
        super().__init__(student, max_seq_length)
        if reduction not in REDUCTIONS:
            raise ValueError(f"reduction must be one of {REDUCTIONS}, not {reduction!r}")
        self.teacher_vectors = teacher_vectors
        self.reduction = reduction
        # Optional constant subtracted from every teacher vector (the teacher's mean vector when
        # distilling into the mean-centred teacher space; see docs/distillation.md). A buffer, so
        # checkpoints carry it.
        shift = (
            torch.zeros(0) if teacher_shift is None else torch.as_tensor(teacher_shift, dtype=torch.float32)
        )
        self.register_buffer("teacher_shift", shift)

    def collate(self, pairs: Sequence[ParallelPair]) -> dict[str, Any]:
        src = [p.src for p in pairs]
        tgt = [p.tgt for p in pairs]
        teacher = torch.from_numpy(np.asarray(self.teacher_vectors(src), dtype=np.float32))
        if self.teacher_shift.numel():
            teacher = teacher - self.teacher_shift
        # Sources and targets are padded separately (one joint batch pads both to the longer side);
        # the two measured the same within run-to-run noise (docs/performance.md).
        return {
            "source": self.tokenize(src),
            "target": self.tokenize(tgt),
            "teacher": teacher.to(self.student.device),
        }

    def forward(self, batch: dict[str, Any]) -> dict[str, torch.Tensor]:
        return distillation_loss(
            batch["teacher"], self.embed(batch["source"]), self.embed(batch["target"]), self.reduction
        )
