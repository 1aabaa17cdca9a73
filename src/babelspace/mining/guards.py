"""Checks that make ``babelspace mine`` refuse early instead of failing late or reusing stale work.

- :func:`shard_identity`: what the embedding shards are keyed by — the model's content hash
  (:func:`babelspace.hashing.model_content_hash`) when it is a local folder or a named offline
  model, so shards of a model retrained at the same path are never reused; plus the backend and
  quantisation when they are not the default (they change the vectors).
- :func:`check_output_paths`: ``--out``, its side files and ``--workdir`` go through the one output
  check (:func:`babelspace.writable.check_output`: apart from every input and model, writable by a
  real probe) before reading or encoding anything.
- :func:`clip_k`: ``--k`` larger than a corpus side is clipped loudly (the summary records it).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from pathlib import Path

from babelspace.errors import BabelspaceError
from babelspace.writable import Named, check_output

logger = logging.getLogger(__name__)


class MiningPathError(BabelspaceError):
    """``--out`` or ``--workdir`` cannot be used."""


def shard_identity(spec: str, backend: str = "torch", quantize: str = "none") -> str:
    """``spec@<content hash>`` for a local/named model folder, else ``spec`` (a hub id), plus
    ``+backend-quantize`` when they are not the default
    (:meth:`babelspace.models.identity.ModelIdentity.key`)."""
    from babelspace.models.identity import model_identity

    variant = [f"{backend}-{quantize}"] if backend != "torch" or quantize != "none" else []
    return model_identity(spec).key(*variant)


def check_output_paths(
    out: Path,
    workdir: Path,
    *,
    side_files: Iterable[tuple[str, Path]] = (),
    inputs: Iterable[Named] = (),
    models: Iterable[Named] = (),
) -> None:
    """Refuse unusable ``--out`` (and its ``side_files``, e.g. the summary) or ``--workdir`` before
    any work: one line naming the flag (:func:`babelspace.writable.check_output`)."""
    out, workdir = Path(out), Path(workdir)
    inputs, models = list(inputs), list(models)
    if out.is_dir():
        raise MiningPathError(f"--out {out} is a folder; give a file path such as {out / 'pairs.tsv'}")
    for flag, path in [("--out", out), *side_files]:
        check_output(path, flag, inputs=inputs, models=models)
    check_output(workdir, "--workdir", inputs=inputs, models=models, folder=True)


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
