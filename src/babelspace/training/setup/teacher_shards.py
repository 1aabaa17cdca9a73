"""The shard files of the teacher cache (:mod:`babelspace.training.setup.teacher_cache`): opening,
checking and writing one shard.

A shard is a folder ``shard-<time>-<pid>-<uuid>/`` holding ``keys.npy`` (the first 16 bytes of the
sha1 of each row's text), ``vecs.npy`` (float32 ``[rows, d]``) and ``meta.json`` (rows, dimension,
whether the vectors are L2-normalised). It is written as a ``.tmp-*`` folder and renamed into place,
so readers only ever see complete shards; a cache that cannot be written keeps the shard's vectors
in memory for the run. A
shard's vectors are memory-mapped on use, so at most :func:`mappable_shards` stay mapped.

=================  ==========================================================
Inputs             a shard's path (:func:`open_shard`), or its keys and vectors
                   (:func:`write_shard`)
Outputs            a :class:`Shard` and its keys; :func:`shard_problem` says why a
                   shard cannot be used (None when it can)
=================  ==========================================================
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
import uuid
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

logger = logging.getLogger(__name__)

KEY_BYTES = 16
KEY_DTYPE = f"S{KEY_BYTES}"
NORM_TOLERANCE = 1e-3
_CHECK_ROWS = 8_192  # rows per chunk when a shard is checked (bounded memory)


@dataclass
class Shard:
    """One shard: where it is, its rows, and its vectors (``None`` while a folder shard is not
    mapped; an array in memory for shards that could not be written)."""

    path: Path
    rows: int
    vecs: np.ndarray | None
    normalized: bool = True
    checked: bool = False
    mapped: bool = True  # vectors memory-mapped from ``path/vecs.npy`` on use


READ_ERRORS = (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile)


def _open_folder(path: Path) -> tuple[Shard, np.ndarray]:
    meta = json.loads((path / "meta.json").read_text())
    keys = np.load(path / "keys.npy", allow_pickle=False)  # in memory only until indexed
    if keys.ndim != 1 or len(keys) != int(meta["rows"]):
        raise ValueError(f"keys of shape {keys.shape} for {meta['rows']} rows")
    return Shard(path, len(keys), None, normalized=bool(meta.get("normalized", True))), keys


def open_shard(path: Path) -> tuple[Shard, np.ndarray] | None:
    """A shard and its keys, or None with a warning when it cannot be read."""
    try:
        return _open_folder(path)
    except READ_ERRORS as exc:
        logger.warning("ignoring unreadable teacher-cache shard %s (%s)", path, exc)
        return None


def mappable_shards() -> int:
    """How many shards may stay memory-mapped: half the open-files limit, raised to its hard
    maximum first (each map holds a file descriptor). Without ``resource`` (Windows): 256, half the
    C runtime's default of 512 open files."""
    try:
        import resource
    except ImportError:
        return 256
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = 1 << 20 if hard == resource.RLIM_INFINITY else hard
    if target > soft:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass
    return max(16, soft // 2)


def shard_problem(shard: Shard, dim: int) -> str | None:
    """Why ``shard`` cannot be used as ``dim``-d teacher vectors, or None when it can: shape,
    dtype, dimension, finiteness and (for normalised vectors) unit norms, checked in chunks."""
    vecs = shard.vecs
    assert vecs is not None
    if vecs.dtype != np.float32:
        return f"dtype {vecs.dtype}, expected float32"
    if vecs.ndim != 2 or vecs.shape[1] != dim:
        return f"vectors of shape {tuple(vecs.shape)}, expected (rows, {dim}) for this teacher"
    if shard.rows != len(vecs):
        return f"{shard.rows} keys for {len(vecs)} vectors"
    for start in range(0, len(vecs), _CHECK_ROWS):
        block = np.asarray(vecs[start : start + _CHECK_ROWS], dtype=np.float64)
        bad = ~np.isfinite(block).all(axis=1)
        if bad.any():
            return f"non-finite values in row {start + int(np.argmax(bad))}"
        if shard.normalized:
            norms = np.linalg.norm(block, axis=1)
            off = np.abs(norms - 1.0) > NORM_TOLERANCE
            if off.any():
                row = int(np.argmax(off))
                return f"row {start + row} has norm {norms[row]:.4g}, expected 1 (normalised vectors)"
    return None


def write_shard(folder: Path, keys: np.ndarray, vecs: np.ndarray, normalized: bool) -> Shard:
    """Write ``keys`` and ``vecs`` as a new shard of ``folder`` (a ``.tmp-*`` folder, fsynced and
    renamed into place) and return it; when the cache cannot be written, the shard keeps its vectors
    in memory for this run, with a warning."""
    unique = f"{time.time_ns()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    tmp, final = folder / f".tmp-{unique}", folder / f"shard-{unique}"
    vecs = np.ascontiguousarray(vecs, dtype=np.float32)
    shard = Shard(final, len(keys), None, normalized=normalized, checked=True)
    try:
        tmp.mkdir(parents=True)
        for name, array in (("keys.npy", keys), ("vecs.npy", vecs)):
            with open(tmp / name, "wb") as fh:
                np.save(fh, array, allow_pickle=False)
                fh.flush()
                os.fsync(fh.fileno())
        meta = {"rows": len(keys), "dim": int(vecs.shape[1]), "normalized": normalized}
        (tmp / "meta.json").write_text(json.dumps(meta))
        os.replace(tmp, final)
    except OSError as exc:  # a read-only or full cache costs re-encoding next time, nothing else
        shutil.rmtree(tmp, ignore_errors=True)
        shard.vecs, shard.mapped = vecs, False  # kept in memory for this run
        logger.warning(
            "cannot store teacher vectors in %s (%s); they will be re-encoded next run", final, exc
        )
    return shard
