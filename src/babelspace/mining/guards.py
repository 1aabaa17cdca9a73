"""Checks that make ``babelspace mine`` refuse early instead of failing late or reusing stale work.

- :func:`model_identity`: what the embedding shards are keyed by — the model's content hash
  (:func:`babelspace.hashing.model_content_hash`) when it is a local folder or a named offline
  model, so shards of a model retrained at the same path are never reused; plus the backend and
  quantisation when they are not the default (they change the vectors).
- :func:`check_output_paths`: ``--out`` must be a file path whose parent is (or can be made) a
  folder, and ``--workdir`` a folder; checked before reading or encoding anything.
- :func:`clip_k`: ``--k`` larger than a corpus side is clipped loudly (the summary records it).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from babelspace.errors import BabelspaceError, ResourceError

logger = logging.getLogger(__name__)


class MiningPathError(BabelspaceError):
    """``--out`` or ``--workdir`` cannot be used."""


def model_identity(spec: str, backend: str = "torch", quantize: str = "none") -> str:
    """``spec@<content hash>`` for a local/named model folder, else ``spec`` (a hub id)."""
    from babelspace.hashing import model_content_hash
    from babelspace.resources import resolve_model

    identity = spec
    try:
        folder = Path(resolve_model(spec))
    except (ResourceError, OSError):
        folder = None
    if folder is not None and folder.is_dir():
        identity = f"{spec}@{model_content_hash(folder)}"
    if backend != "torch" or quantize != "none":
        identity += f"+{backend}-{quantize}"
    return identity


def _first_existing(path: Path) -> Path:
    for p in [path, *path.parents]:
        if p.exists():
            return p
    return Path(".")


def _check_folder_path(folder: Path, flag: str) -> None:
    """``folder`` exists as a writable directory, or can be created (its nearest existing
    ancestor is a writable directory)."""
    existing = _first_existing(folder)
    if not existing.is_dir():
        raise MiningPathError(f"{flag} {folder}: {existing} is a file, not a folder; choose another {flag}")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise MiningPathError(f"{flag} {folder}: {existing} is not writable; choose another {flag}")


def check_output_paths(out: Path, workdir: Path) -> None:
    """Refuse unusable ``--out``/``--workdir`` before any work (one line naming the flag)."""
    out, workdir = Path(out), Path(workdir)
    if out.is_dir():
        raise MiningPathError(f"--out {out} is a folder; give a file path such as {out / 'pairs.tsv'}")
    _check_folder_path(out.parent, "--out")
    if workdir.exists() and not workdir.is_dir():
        raise MiningPathError(f"--workdir {workdir} is a file, not a folder; choose another --workdir")
    _check_folder_path(workdir, "--workdir")


def clip_k(k: int, n_src: int, n_tgt: int, warn: bool = True) -> int:
    """The neighbourhood size actually usable: ``k`` or the smaller corpus side, with a warning (unless
    ``warn`` is False: the decoy searches of a run that already warned)."""
    usable = max(1, min(k, n_src, n_tgt))
    if usable < k and warn:
        logger.warning(
            "--k %d is larger than the corpus (%d source, %d target sentences): using k=%d; margins of "
            "such small neighbourhoods are floored (docs/mining.md)",
            k,
            n_src,
            n_tgt,
            usable,
        )
    return usable
