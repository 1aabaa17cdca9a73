"""Which model a spec names: the one answer every cache and report keys a model by.

A local folder (or a named offline model, which resolves to one) is identified by the content hash
of its weight and configuration files (:func:`babelspace.hashing.model_content_hash`), so a model
retrained at the same path never reuses another's vectors; a hub id identifies itself by its name.
The teacher cache, the held-out table's baseline cache, the mining shards and MTEB's revision all
read :func:`model_identity`, each adding what else changes its vectors (backend, settings).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from babelspace.errors import BabelspaceError
from babelspace.hashing import model_content_hash
from babelspace.resources import resolve_model

__all__ = ["ModelIdentity", "model_identity"]


@dataclass(frozen=True)
class ModelIdentity:
    """What ``spec`` is: its local ``folder`` and that folder's ``content_hash``, both None for a
    hub id (or a spec that does not resolve)."""

    spec: str
    folder: Path | None
    content_hash: str | None

    def key(self, *variant: str) -> str:
        """``spec@<content hash>`` (``spec`` alone for a hub id), then ``+``-joined ``variant``
        parts that change the vectors (e.g. ``onnx-int8``)."""
        key = f"{self.spec}@{self.content_hash}" if self.content_hash else self.spec
        return "+".join([key, *variant])


def model_identity(spec: str) -> ModelIdentity:
    """The identity of the model ``spec`` (a local folder, a named offline model or a hub id)."""
    try:
        folder: Path | None = Path(resolve_model(spec))
    except (BabelspaceError, OSError):
        folder = None
    if folder is None or not folder.is_dir():
        return ModelIdentity(spec, None, None)
    return ModelIdentity(spec, folder, model_content_hash(folder))
