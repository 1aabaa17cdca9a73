"""Multilingual knowledge distillation (Reimers & Gurevych 2020, arXiv 2004.09813, §2).

A fixed English teacher M and a multilingual student M̂. For a batch of pairs (s_i, t_i), t_i a
translation of s_i, the loss is

    1/B · Σ_i ( ||M(s_i) − M̂(s_i)||² + ||M(s_i) − M̂(t_i)||² )          (reduction="paper", default)

sentence-transformers' ``MSELoss`` instead averages every element of both differences, which is the
paper's value divided by 2·d (reduction="elementwise").

Optional, not in the paper (``contrast_weight`` λ > 0, babelspace's default recipe): a
teacher-space contrastive term. Each student vector (of the English source and of the translation)
must pick its own teacher vector out of a fixed bank of teacher vectors of other English sentences
(InfoNCE over cosine similarities × ``contrast_scale``)::

    loss += λ · ( CE(M̂(s_i) → M(s_i)) + CE(M̂(t_i) → M(s_i)) )

Optional, not in the paper (``english_cosine`` κ > 0): an English-side cosine term that keeps the
student's vector of the English sentence, as the model exports it, on the teacher's vector (the
drop-in check: same cosine thresholds as the teacher)::

    loss += κ · 1/B Σ_i ( 1 − cos(export(M̂(s_i)), M(s_i)) )

A pair whose two sides are the same English text (an English-only ``(s, s)`` row) runs through the
student once: its target vector is its source vector (the same loss as two passes, minus the
second pass's dropout noise).

With targets centred on the teacher's mean μ (``teacher_shift``) and a model exported with μ added
back, ``contrast_offset`` = μ computes this term in the exported space: cosines of M̂(·) + μ
against the raw teacher vectors M(·), which is how the exported model is queried against an index
of the teacher's vectors (with ``contrast_radius`` r: of μ + r · M̂(·)/|M̂(·)|, the export that gives
every vector's centred part the teacher's RMS distance from its mean). In the centred space the same cosines rank differently: with unit-norm
teacher vectors, cosine ranking of raw queries is Euclidean nearest neighbour in the centred
space, which favours teacher vectors near the mean (hubs; Radovanović et al. 2010, "Hubs in space", JMLR 11).

The MSE pulls every coordinate towards the teacher equally; retrieval in the teacher's space only
depends on the coordinates that tell sentences apart, which this term targets directly. Teacher
vectors are cached, so the bank costs no forward passes (docs/distillation.md).

=================  ==========================================================
Inputs             parallel pairs (English source, translation); teacher vectors
                   of the sources (precomputed once, see :class:`TeacherCache`)
Outputs            ``loss``, ``mse_source``, ``mse_target`` (per-pair squared distances),
                   with a bank also ``nce_source``, ``nce_target``; with ``english_cosine``
                   also ``cos_source`` (mean cosine of the English side as exported)
=================  ==========================================================

Example::

    objective = DistillationObjective(student, teacher_vectors=cache.lookup)
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


def teacher_contrastive_loss(
    student: torch.Tensor, teacher: torch.Tensor, bank: torch.Tensor, scale: float = 20.0
) -> torch.Tensor:
    """InfoNCE of student vectors ``[B, d]`` against teacher vectors: row i must pick its positive
    ``teacher[i]`` out of itself and the ``bank`` ``[K, d]`` of teacher vectors of other sentences;
    bank rows that are the positive's own sentence (cosine > 0.9999) are masked out. Each row's term
    depends on that row alone (not on the other rows of the batch), so splitting a batch across
    processes (DDP) gives the same loss and gradients as one process."""
    s = torch.nn.functional.normalize(student, dim=-1)
    t = torch.nn.functional.normalize(teacher, dim=-1)
    b = torch.nn.functional.normalize(bank.to(teacher), dim=-1)
    positive = (s * t).sum(dim=1, keepdim=True)
    negatives = s @ b.T
    with torch.no_grad():
        same = (t @ b.T) > 0.9999
    negatives = negatives.masked_fill(same, float("-inf"))
    logits = scale * torch.cat([positive, negatives], dim=1)
    return torch.nn.functional.cross_entropy(logits, torch.zeros(len(s), dtype=torch.long, device=s.device))


class DistillationObjective(Objective):
    """Pull the student's vectors of an English sentence and of its translation onto the teacher's
    vector of the English sentence. ``teacher_vectors`` maps a list of English texts to a float32
    array (a :class:`~babelspace.training.setup.teacher_cache.TeacherCache` lookup)."""

    collate_in_workers = True  # tokenizes and looks up cached vectors only

    name = "distill"

    def __init__(
        self,
        student: SentenceTransformer,
        teacher_vectors: Callable[[Sequence[str]], np.ndarray],
        reduction: str = "paper",
        max_seq_length: int | None = None,
        teacher_shift: np.ndarray | None = None,
        contrast_weight: float = 0.0,
        contrast_bank: np.ndarray | None = None,
        contrast_scale: float = 20.0,
        contrast_offset: np.ndarray | None = None,
        contrast_radius: float | None = None,
        english_cosine: float = 0.0,
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
        if contrast_weight < 0:
            raise ValueError(f"contrast_weight must be >= 0, not {contrast_weight}")
        if contrast_weight > 0 and (contrast_bank is None or len(contrast_bank) == 0):
            raise ValueError("the teacher-space contrastive term needs a bank of teacher vectors")
        self.contrast_weight = float(contrast_weight)
        self.contrast_scale = float(contrast_scale)
        # Teacher vectors (already shifted like the targets) of other English sentences: negatives
        # for the contrastive term. A buffer, so a resumed run uses exactly the same bank.
        bank = (
            torch.zeros(0)
            if contrast_bank is None or contrast_weight == 0
            else torch.as_tensor(np.asarray(contrast_bank), dtype=torch.float32)
        )
        self.register_buffer("contrast_bank", bank)
        # Optional constant added to student, teacher and bank vectors before the contrastive term
        # (the teacher mean that the export adds back): the term then ranks in the exported space,
        # against the teacher's raw vectors, the way the exported model is queried. A buffer.
        offset = (
            torch.zeros(0)
            if contrast_offset is None
            else torch.as_tensor(np.asarray(contrast_offset), dtype=torch.float32)
        )
        self.register_buffer("contrast_offset", offset)
        # Optional norm given to the student's vectors before the offset (``--export-norm teacher``):
        # the exported model outputs offset + radius · v / |v|, and the term ranks those vectors.
        if contrast_radius is not None and not (np.isfinite(contrast_radius) and contrast_radius > 0):
            raise ValueError(f"contrast_radius must be finite and > 0, not {contrast_radius}")
        self.contrast_radius = None if contrast_radius is None else float(contrast_radius)
        if not (np.isfinite(english_cosine) and english_cosine >= 0):
            raise ValueError(f"english_cosine must be finite and >= 0, not {english_cosine}")
        self.english_cosine = float(english_cosine)

    def _load_from_state_dict(
        self, state_dict: dict[str, Any], prefix: str, *args: Any, **kwargs: Any
    ) -> None:
        # A resumed run continues with the bank it started with, even if this run would build
        # another one (e.g. more --max-steps plan more sources).
        saved = state_dict.get(prefix + "contrast_bank")
        if saved is not None and saved.shape != self.contrast_bank.shape:
            self.contrast_bank = torch.empty_like(saved)
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def collate(self, pairs: Sequence[ParallelPair]) -> dict[str, Any]:
        src = [p.src for p in pairs]
        # rows whose target differs from the source; an (s, s) row runs through the student once
        differs = [p.tgt != p.src for p in pairs]
        teacher = torch.from_numpy(np.asarray(self.teacher_vectors(src), dtype=np.float32))
        teacher = teacher.to(self.batch_device, non_blocking=True)
        # Sources and targets are padded separately (one joint batch pads both to the longer side);
        # the two measured the same within run-to-run noise (docs/performance.md).
        batch = {"source": self.tokenize(src), "teacher": teacher}
        if all(differs):
            batch["target"] = self.tokenize([p.tgt for p in pairs])
        elif any(differs):
            batch["target"] = self.tokenize([p.tgt for p, d in zip(pairs, differs, strict=True) if d])
            batch["target_rows"] = torch.tensor(differs, dtype=torch.bool, device=self.batch_device)
        return batch

    def _targets(self, batch: dict[str, Any], source: torch.Tensor) -> torch.Tensor:
        """The student's vectors of the targets: the source's where a row's target is its source."""
        if "target" not in batch:
            return source
        embedded = self.embed(batch["target"])
        rows = batch.get("target_rows")
        if rows is None:
            return embedded
        target = source.clone()
        target[rows.to(source.device)] = embedded.to(source.dtype)
        return target

    def forward(self, batch: dict[str, Any]) -> dict[str, torch.Tensor]:
        source = self.embed(batch["source"])
        target = self._targets(batch, source)
        teacher = batch["teacher"]
        if self.teacher_shift.numel():  # the buffer follows the module; the batch follows the student
            teacher = teacher - self.teacher_shift.to(teacher.device)
        out = distillation_loss(teacher, source, target, self.reduction)
        if self.contrast_weight > 0 or self.english_cosine > 0:
            source, target = self._exported(source), self._exported(target)
            if self.contrast_offset.numel():
                teacher = teacher + self.contrast_offset.to(teacher)
        if self.english_cosine > 0:
            cos = torch.nn.functional.cosine_similarity(source, teacher, dim=-1).mean()
            out["loss"] = out["loss"] + self.english_cosine * (1.0 - cos)
            out["cos_source"] = cos.detach()
        if self.contrast_weight > 0:
            bank = self.contrast_bank.to(teacher)  # both centred, as the targets above
            if self.contrast_offset.numel():
                bank = bank + self.contrast_offset.to(teacher)
            nce_s = teacher_contrastive_loss(source, teacher, bank, self.contrast_scale)
            nce_t = teacher_contrastive_loss(target, teacher, bank, self.contrast_scale)
            out["loss"] = out["loss"] + self.contrast_weight * (nce_s + nce_t)
            out["nce_source"], out["nce_target"] = nce_s.detach(), nce_t.detach()
        return out

    def _exported(self, vectors: torch.Tensor) -> torch.Tensor:
        """The student's vectors as the contrastive term ranks them (radius, then offset)."""
        if self.contrast_radius is not None:
            vectors = self.contrast_radius * torch.nn.functional.normalize(vectors, dim=-1)
        if self.contrast_offset.numel():
            vectors = vectors + self.contrast_offset.to(vectors)
        return vectors
