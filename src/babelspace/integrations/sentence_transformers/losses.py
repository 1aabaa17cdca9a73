"""babelspace's objectives as sentence-transformers losses.

``SentenceTransformerTrainer(model, args, train_dataset, loss=MexmaLoss(model))`` trains with
the same objective code that ``babelspace train`` runs: each adapter holds a babelspace objective and
turns the trainer's tokenised columns into that objective's batch. The loss returns its components
as a dict (the trainer sums them for the gradient and logs each), and its heads (MEXMA's unmasking
head) are submodules, so the trainer's optimizer updates them.

==================  =======================================  ====================================
loss                dataset columns                          label
==================  =======================================  ====================================
DistillationLoss    (english, translation)                   the teacher's vector of ``english``
ContrastiveLoss     (sentence, translation)                  none
MexmaLoss           (sentence, translation)                  none
==================  =======================================  ====================================

Tokenisation is the trainer's: the model's default prompt (e5's ``"query: "``) is applied only if
the training arguments set ``prompts``. Example::

    from sentence_transformers import SentenceTransformerTrainer
    from babelspace.integrations.sentence_transformers.losses import MexmaLoss
    from babelspace.objectives.mexma import make_mexma_student

    model = make_mexma_student(SentenceTransformer("intfloat/multilingual-e5-small"))
    trainer = SentenceTransformerTrainer(model=model, train_dataset=pairs, loss=MexmaLoss(model))
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
import torch.nn.functional as F
from sentence_transformers import SentenceTransformer

__all__ = ["ContrastiveLoss", "DistillationLoss", "MexmaLoss"]


def _two_columns(sentence_features: Iterable[dict[str, torch.Tensor]]) -> list[dict[str, torch.Tensor]]:
    features = list(sentence_features)
    if len(features) != 2:
        raise ValueError(f"expected two text columns (a sentence and its translation), got {len(features)}")
    return features


def _pad_to(x: torch.Tensor, length: int, value: int) -> torch.Tensor:
    return F.pad(x, (0, length - x.shape[1]), value=value)


def stack_columns(
    a: dict[str, torch.Tensor], b: dict[str, torch.Tensor], pad_id: int
) -> dict[str, torch.Tensor]:
    """Two tokenised columns as one batch ``[a; b]`` padded to a common length: what babelspace's
    objectives get from tokenising both sides at once."""
    length = max(a["input_ids"].shape[1], b["input_ids"].shape[1])
    out = {}
    for key in a:
        if not torch.is_tensor(a[key]) or a[key].dim() != 2:
            continue
        value = pad_id if key == "input_ids" else 0
        out[key] = torch.cat([_pad_to(a[key], length, value), _pad_to(b[key], length, value)])
    return out


class _Adapter(torch.nn.Module):
    def __init__(self, model: SentenceTransformer, objective: torch.nn.Module) -> None:
        super().__init__()
        self.model = model
        self.objective = objective

    def get_config_dict(self) -> dict[str, Any]:
        return {"objective": type(self.objective).__name__}


class DistillationLoss(_Adapter):
    """Multilingual knowledge distillation (Reimers & Gurevych 2020, §2): the student's vectors of an
    English sentence and of its translation regressed onto the teacher's vector of the English
    sentence (``reduction="paper"``: sum over dimensions, mean over pairs), optionally with
    babelspace's teacher-space contrastive term against a ``bank`` of teacher vectors."""

    def __init__(
        self,
        model: SentenceTransformer,
        reduction: str = "paper",
        contrast_weight: float = 0.0,
        contrast_bank: Any = None,
        contrast_scale: float = 20.0,
    ) -> None:
        from babelspace.objectives.distillation import DistillationObjective as Objective

        objective = Objective(
            model,
            teacher_vectors=lambda texts: None,  # labels carry the teacher vectors
            reduction=reduction,
            contrast_weight=contrast_weight,
            contrast_bank=contrast_bank,
            contrast_scale=contrast_scale,
        )
        super().__init__(model, objective)

    def forward(
        self, sentence_features: Iterable[dict[str, torch.Tensor]], labels: torch.Tensor
    ) -> torch.Tensor:
        source, target = _two_columns(sentence_features)
        batch = {"source": source, "target": target, "teacher": labels.float()}
        return self.objective(batch)["loss"]


class ContrastiveLoss(_Adapter):
    """LaBSE's translation ranking with additive margin (Feng et al. 2022, §3): bidirectional
    in-batch softmax over scaled cosine similarities, margin on the positive."""

    def __init__(self, model: SentenceTransformer, scale: float = 20.0, margin: float = 0.3) -> None:
        from babelspace.objectives.contrastive import ContrastiveObjective

        super().__init__(model, ContrastiveObjective(model, scale=scale, margin=margin))

    def forward(
        self, sentence_features: Iterable[dict[str, torch.Tensor]], labels: Any = None
    ) -> torch.Tensor:
        a, b = _two_columns(sentence_features)
        features = stack_columns(a, b, self.model.tokenizer.pad_token_id or 0)
        return self.objective({"features": features, "n": a["input_ids"].shape[0]})["loss"]


class MexmaLoss(_Adapter):
    """MEXMA (Janeiro et al. 2025, §3): cross-lingual unmasking from the other language's clean
    sentence vector, alignment of the clean sentence vectors, KoLeo. Keyword arguments go to
    :class:`~babelspace.objectives.mexma.MexmaObjective`. The model should pool by CLS
    (:func:`~babelspace.objectives.mexma.make_mexma_student`)."""

    def __init__(self, model: SentenceTransformer, **kwargs: Any) -> None:
        from babelspace.objectives.mexma import MexmaObjective

        super().__init__(model, MexmaObjective(model, **kwargs))

    def forward(
        self, sentence_features: Iterable[dict[str, torch.Tensor]], labels: Any = None
    ) -> torch.Tensor:
        a, b = _two_columns(sentence_features)
        n = a["input_ids"].shape[0]
        clean = stack_columns(a, b, self.model.tokenizer.pad_token_id or 0)
        ids, attn = clean["input_ids"], clean["attention_mask"]
        m_a, l_a = self.objective.mask(ids[:n], attn[:n])
        m_b, l_b = self.objective.mask(ids[n:], attn[n:])
        masked = {**clean, "input_ids": torch.cat([m_a, m_b])}
        batch = {"clean": clean, "masked": masked, "labels": torch.cat([l_a, l_b]), "n": n}
        return self.objective(batch)["loss"]
