"""Bidirectional in-batch softmax with additive margin (LaBSE: Feng, Yang, Cer, Arivazhagan, Wang
2022, "Language-agnostic BERT Sentence Embedding", arXiv 2007.01852, §3.1 eqs. 1-2; the margin
formulation from Yang et al. 2019, "Improving multilingual sentence embedding using bi-directional
dual encoder with additive margin softmax", §3). MEXMA's rebuttal reimplements this objective on
its own backbone and data as the fair LaBSE baseline.

For a batch of translation pairs (x_i, y_i) with L2-normalised vectors, φ(x, y) = cos(x, y), scale
s and margin m:

    L_x→y = − 1/B · Σ_i log( e^{s(φ(x_i,y_i) − m)} / ( e^{s(φ(x_i,y_i) − m)} + Σ_{j≠i} e^{s φ(x_i,y_j)} ) )

and L_y→x likewise over the columns. The loss is ½ (L_x→y + L_y→x) (LaBSE sums the two; the mean
keeps the scale of one cross-entropy). The margin is subtracted from the positives only, so the
model must beat every in-batch negative by at least m.

=================  ==========================================================
Inputs             parallel pairs (``src``, ``tgt``); other pairs in the batch serve
                   as negatives, so avoid duplicate sentences within a batch
Outputs            ``loss``, ``src_to_tgt``, ``tgt_to_src`` (cross-entropies),
                   ``accuracy`` (in-batch top-1 retrieval, both directions), ``scale``
=================  ==========================================================

Example::

    objective = ContrastiveObjective(student, scale=20.0, margin=0.3)
    batch = objective.collate(pairs)
    out = objective(batch); out["loss"].backward()
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F
from sentence_transformers import SentenceTransformer

from babelspace.data.pairs import ParallelPair
from babelspace.objectives.base import Objective
from babelspace.objectives.parts.gather import gather_rows, world_scale

__all__ = ["ContrastiveObjective", "additive_margin_softmax_loss"]


def additive_margin_softmax_loss(
    a: torch.Tensor, b: torch.Tensor, scale: float | torch.Tensor = 20.0, margin: float = 0.3
) -> dict[str, torch.Tensor]:
    """The loss on already-computed vectors ``a``, ``b`` ([B, d], row i of ``a`` translates row i
    of ``b``). Returns ``loss`` (with graph), ``src_to_tgt``, ``tgt_to_src`` and ``accuracy``."""
    if a.shape != b.shape or a.dim() != 2:
        raise ValueError(
            f"expected two [B, d] tensors of equal shape, got {tuple(a.shape)} and {tuple(b.shape)}"
        )
    a = F.normalize(a.float(), dim=-1)
    b = F.normalize(b.float(), dim=-1)
    sim = a @ b.T
    eye = torch.eye(sim.shape[0], device=sim.device, dtype=sim.dtype)
    logits = scale * (sim - margin * eye)
    target = torch.arange(sim.shape[0], device=sim.device)
    a2b = F.cross_entropy(logits, target)
    b2a = F.cross_entropy(logits.T, target)
    with torch.no_grad():
        acc = 0.5 * ((sim.argmax(1) == target).float().mean() + (sim.argmax(0) == target).float().mean())
    return {
        "loss": 0.5 * (a2b + b2a),
        "src_to_tgt": a2b.detach(),
        "tgt_to_src": b2a.detach(),
        "accuracy": acc,
    }


class ContrastiveObjective(Objective):
    """LaBSE-style translation ranking with additive margin on the student's sentence vectors.

    ``learnable_scale=True`` trains the scale (stored as its log, initialised at ``scale``)."""

    collate_in_workers = True  # tokenizes and looks up cached vectors only

    name = "contrastive"

    def __init__(
        self,
        student: SentenceTransformer,
        scale: float = 20.0,
        margin: float = 0.3,
        learnable_scale: bool = False,
        max_seq_length: int | None = None,
        gather_negatives: bool = False,
    ) -> None:
        super().__init__(student, max_seq_length)
        # Under DDP: every process's pairs are negatives for every other's (LaBSE, §3.2), so N
        # processes with global batch B equal one process with batch B (objectives/parts/gather.py).
        self.gather_negatives = gather_negatives
        if scale <= 0:
            raise ValueError(f"scale must be positive, not {scale}")
        self.margin = float(margin)
        self.learnable_scale = learnable_scale
        log_scale = torch.tensor(math.log(scale), device=student.device)
        if learnable_scale:
            self.log_scale = torch.nn.Parameter(log_scale)
        else:
            self.register_buffer("log_scale", log_scale, persistent=False)

    @property
    def scale(self) -> torch.Tensor:
        return self.log_scale.exp()

    def collate(self, pairs: Sequence[ParallelPair]) -> dict[str, Any]:
        if len(pairs) < 2:
            raise ValueError("an in-batch softmax needs at least two pairs per batch")
        return {"features": self.tokenize([p.src for p in pairs] + [p.tgt for p in pairs]), "n": len(pairs)}

    def forward(self, batch: dict[str, Any]) -> dict[str, torch.Tensor]:
        n = int(batch["n"])
        emb = self.embed(batch["features"])
        src, tgt = emb[:n], emb[n:]
        if self.gather_negatives:
            src, tgt = gather_rows(src), gather_rows(tgt)
        out = additive_margin_softmax_loss(src, tgt, self.scale, self.margin)
        if self.gather_negatives:
            out["loss"] = out["loss"] * world_scale()
        out["scale"] = self.scale.detach()
        return out
