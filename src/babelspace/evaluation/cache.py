"""The per-run embedding cache: every distinct text is encoded once per model."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["PROGRESS_BATCHES", "PROGRESS_MIN_TEXTS", "EmbeddingCache"]

logger = logging.getLogger(__name__)

#: Fewest new texts for which encoding shows progress: smaller batches take seconds, a bar is noise.
PROGRESS_MIN_TEXTS = 256
#: Batches encoded between two progress updates.
PROGRESS_BATCHES = 8


class EmbeddingCache:
    """Raw vectors of one model, keyed by text: each distinct text is encoded once per run.

    Vectors are kept as the model outputs them; the cosine-based tasks normalise them, the MSE task uses
    them raw.
    """

    def __init__(self, model: Any, name: str, *, batch_size: int = 64, progress: bool = False) -> None:
        self.model = model
        self.name = name
        self.batch_size = batch_size
        self.progress = progress
        self._vecs: dict[str, np.ndarray] = {}
        self.seconds = 0.0
        self.n_encoded = 0
        self.n_requested = 0
        self._dim: int | None = None

    @property
    def dim(self) -> int:
        if self._dim is None:
            from babelspace.models.encoder import embedding_dim

            self._dim = embedding_dim(self.model)
        return self._dim

    def __contains__(self, text: str) -> bool:
        return text in self._vecs

    def __len__(self) -> int:
        return len(self._vecs)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """float32 [len(texts), dim] raw vectors; texts not seen before are encoded in one batch."""
        self.n_requested += len(texts)
        missing = [t for t in dict.fromkeys(texts) if t not in self._vecs]
        if missing:
            self._encode_new(missing)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([self._vecs[t] for t in texts]).astype(np.float32, copy=False)

    def _encode_new(self, missing: list[str]) -> None:
        from babelspace.models.encoder import encode

        t0 = time.perf_counter()
        logger.info("%s: encoding %d new texts (%d cached)", self.name, len(missing), len(self._vecs))
        if self.progress and len(missing) >= PROGRESS_MIN_TEXTS:
            vecs = self._encode_with_progress(missing)
        else:
            vecs = encode(
                self.model, missing, batch_size=self.batch_size, show_progress=False, normalize=False
            )
        for text, vec in zip(missing, vecs, strict=True):
            self._vecs[text] = vec
        self._dim = int(vecs.shape[1])
        self.n_encoded += len(missing)
        self.seconds += time.perf_counter() - t0

    def _encode_with_progress(self, texts: list[str]) -> np.ndarray:
        """Encode ``texts`` in pieces of ``PROGRESS_BATCHES`` batches under a
        :class:`~babelspace.progress.Progress` (a bar on a terminal, log lines with ETA otherwise).
        Texts are taken longest first, as sentence-transformers orders one call, so the batches and
        their padding are those of a single call."""
        from babelspace.models.encoder import encode
        from babelspace.progress import Progress

        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        step = self.batch_size * PROGRESS_BATCHES
        out: np.ndarray | None = None
        with Progress(total=len(texts), desc=f"encode {self.name}", unit="text") as bar:
            for s in range(0, len(order), step):
                ids = order[s : s + step]
                piece = encode(
                    self.model,
                    [texts[i] for i in ids],
                    batch_size=self.batch_size,
                    show_progress=False,
                    normalize=False,
                )
                if out is None:
                    out = np.empty((len(texts), piece.shape[1]), dtype=np.float32)
                out[ids] = piece
                bar.update(len(ids))
        return out if out is not None else np.zeros((0, self.dim), dtype=np.float32)

    def stats(self) -> dict[str, Any]:
        return {
            "model": self.name,
            "texts_encoded": self.n_encoded,
            "texts_requested": self.n_requested,
            "encode_time_s": round(self.seconds, 3),
        }
