"""What every objective looks like to the trainer."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from sentence_transformers import SentenceTransformer

from babelspace.data.pairs import ParallelPair
from babelspace.models.encoder import default_prompt, tokenize
from babelspace.models.token_ids import CachedIds


class Objective(torch.nn.Module):
    """A loss over batches of parallel pairs.

    Subclasses implement :meth:`collate` (pairs -> tensors; runs outside autograd) and
    :meth:`forward` (batch -> dict of scalar tensors, with the total under ``"loss"``).
    Extra trainable modules (heads) are ordinary submodules, so ``objective.parameters()``
    covers the student *and* the heads, and ``objective.state_dict()`` checkpoints both.
    """

    name = "objective"
    #: Whether :meth:`collate` may run in a data-loader worker process: it reads no module state
    #: that lives on the device and draws no random numbers (see `babelspace.training.batches`).
    collate_in_workers = False

    def __init__(self, student: SentenceTransformer, max_seq_length: int | None = None) -> None:
        super().__init__()
        self.student = student
        self.max_seq_length = max_seq_length or student.max_seq_length
        self.prompt = default_prompt(student)
        #: Where collated tensors go; None: the student's device. A loader worker sets the CPU.
        self.collate_device: torch.device | None = None
        #: The batch's token ids from the token cache, set around :meth:`collate` by the input
        #: pipeline (`babelspace.training.batches`); None: :meth:`tokenize` tokenizes the texts.
        self.cached_ids: CachedIds | None = None

    @property
    def batch_device(self) -> torch.device:
        """The device :meth:`collate` puts tensors on."""
        return self.collate_device or self.student.device

    def tokenize(self, texts: Sequence[str]) -> dict[str, torch.Tensor]:
        """The student's features of ``texts`` (its prompt prepended): from the batch's cached ids
        when every text is among them, else from the tokenizer (the same tensors either way)."""
        features = self.cached_ids.features(texts) if self.cached_ids is not None else None
        if features is None:
            texts = [self.prompt + t for t in texts] if self.prompt else list(texts)
            features = tokenize(self.student, texts)
        device = self.batch_device
        return {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in features.items()}

    def embed(self, features: dict[str, torch.Tensor]) -> torch.Tensor:
        return self.student(dict(features))["sentence_embedding"]

    def collate(self, pairs: Sequence[ParallelPair]) -> dict[str, Any]:
        raise NotImplementedError

    def begin_step(self, step: int) -> None:
        """Called by the trainer before optimizer step ``step`` (0-based, resumed runs included), for
        objectives whose loss changes with the step (MEXMA's head warm-up); nothing by default."""

    def head_state(self) -> dict[str, Any]:
        """State of modules that are not part of the exported student (kept in checkpoints)."""
        return {k: v for k, v in self.state_dict().items() if not k.startswith("student.")}
