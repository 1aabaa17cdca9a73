"""Embeddings on disk: fixed-size ``.npy`` shards plus a manifest, read back through memory maps.

Layout of one side (``WORKDIR/src`` or ``WORKDIR/tgt``)::

    manifest.json          model, dim, dtype, shard_size, n, fingerprint (sha256 of the sentences)
    shard-00000.npy        rows [0, shard_size)            float32 or float16, L2-normalised
    shard-00000.json       sha256 of the shard's vector bytes and of its sentences
    shard-00001.npy        rows [shard_size, 2*shard_size)
    ...

A shard is written to a temporary beside it (:func:`babelspace.writable.atomic_path`) and renamed
when complete, then its ``.json`` record (the temporaries of a killed run are removed by the next
run over the folder);
an interrupted run resumes by encoding only the missing shards. A shard is reused only when it is
whole and true: the shape and dtype of the manifest, finite values, unit norms, the bytes whose
sha256 its record holds and (when the sentences are given) the sentences it was encoded from. Any
other shard (a value edited, rows reordered, no record) is reported and encoded again. A manifest that does not
match the current run (other model or dimension, other input, other dtype or shard size) is refused
with a message telling to use a new ``--workdir``; nothing is overwritten silently.

Reads open the shard with ``np.load(mmap_mode="r")``, copy the requested rows to float32 and drop the
map again, so the resident memory of a search does not grow with the corpus.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

from babelspace.errors import ResourceError
from babelspace.writable import atomic_path, atomic_write_text

__all__ = ["ArrayMatrix", "Manifest", "Matrix", "ShardStore"]

logger = logging.getLogger(__name__)

MANIFEST = "manifest.json"
DTYPES = ("float32", "float16")
#: Largest deviation of a stored vector's L2 norm from 1 (float16 rounding stays far below).
NORM_TOLERANCE = 1e-2


def texts_sha256(texts: Sequence[str]) -> str:
    """sha256 of sentences in order (each UTF-8, NUL-terminated)."""
    h = hashlib.sha256()
    for t in texts:
        h.update(t.encode("utf-8") + b"\x00")
    return h.hexdigest()


def _values_problem(arr: np.ndarray) -> str | None:
    """Why ``arr`` is not a block of finite unit vectors, or None."""
    values = np.asarray(arr, dtype=np.float32)
    if not np.isfinite(values).all():
        return "holds non-finite values"
    norms = np.linalg.norm(values, axis=1)
    if len(norms) and np.abs(norms - 1.0).max() > NORM_TOLERANCE:
        return f"holds vectors that are not unit length (norm {norms[np.abs(norms - 1).argmax()]:.4g})"
    return None


def _array_sha256(arr: np.ndarray) -> str:
    return hashlib.sha256(memoryview(np.ascontiguousarray(arr)).cast("B")).hexdigest()


class Matrix(Protocol):
    """Row access to a [n, dim] matrix that may live on disk."""

    @property
    def dim(self) -> int: ...

    def __len__(self) -> int: ...

    def rows(self, start: int, stop: int) -> np.ndarray:
        """float32 copy of rows [start, stop)."""
        ...

    def blocks(self, start: int, stop: int, max_rows: int | None = None) -> Iterator[tuple[int, np.ndarray]]:
        """(first row, float32 rows) pieces covering [start, stop): within one shard and at most
        ``max_rows`` rows each."""
        ...

    def take(self, ids: np.ndarray) -> np.ndarray:
        """float32 rows at arbitrary indices."""
        ...


class ArrayMatrix:
    """An in-memory array behind the :class:`Matrix` interface (tests, benchmarks, small corpora)."""

    def __init__(self, array: np.ndarray, block_rows: int = 65536) -> None:
        if array.ndim != 2:
            raise ValueError(f"expected a 2-D array, got shape {array.shape}")
        self.array = array
        self.block_rows = block_rows

    @property
    def dim(self) -> int:
        return int(self.array.shape[1])

    def __len__(self) -> int:
        return int(self.array.shape[0])

    def rows(self, start: int, stop: int) -> np.ndarray:
        return np.ascontiguousarray(self.array[start:stop], dtype=np.float32)

    def blocks(self, start: int, stop: int, max_rows: int | None = None) -> Iterator[tuple[int, np.ndarray]]:
        step = min(self.block_rows, max_rows or self.block_rows)
        for s in range(start, stop, step):
            yield s, self.rows(s, min(stop, s + step))

    def take(self, ids: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(self.array[np.asarray(ids, dtype=np.int64)], dtype=np.float32)


class StackedMatrix:
    """Several matrices of one dimension read as one, rows of the first first (a bitext side and its
    ``--background`` sentences searched as one database)."""

    def __init__(self, parts: list[Matrix]) -> None:
        if not parts or len({m.dim for m in parts}) != 1:
            raise ValueError("StackedMatrix needs one or more matrices of one dimension")
        self.parts = parts
        self.offsets = np.cumsum([0] + [len(m) for m in parts])

    @property
    def dim(self) -> int:
        return self.parts[0].dim

    def __len__(self) -> int:
        return int(self.offsets[-1])

    def blocks(self, start: int, stop: int, max_rows: int | None = None) -> Iterator[tuple[int, np.ndarray]]:
        for part, lo, hi in zip(self.parts, self.offsets[:-1], self.offsets[1:], strict=True):
            a, b = max(start, int(lo)), min(stop, int(hi))
            if a < b:
                for pos, piece in part.blocks(a - int(lo), b - int(lo), max_rows):
                    yield pos + int(lo), piece

    def rows(self, start: int, stop: int) -> np.ndarray:
        stop = min(stop, len(self))
        pieces = [piece for _, piece in self.blocks(start, stop)]
        return np.concatenate(pieces) if pieces else np.empty((0, self.dim), dtype=np.float32)

    def take(self, ids: np.ndarray) -> np.ndarray:
        ids = np.asarray(ids, dtype=np.int64).ravel()
        out = np.empty((len(ids), self.dim), dtype=np.float32)
        part_of = np.searchsorted(self.offsets, ids, side="right") - 1
        for j in np.unique(part_of):
            sel = np.nonzero(part_of == j)[0]
            out[sel] = self.parts[int(j)].take(ids[sel] - int(self.offsets[j]))
        return out


@dataclass(frozen=True)
class Manifest:
    model: str
    dim: int
    dtype: str
    shard_size: int
    n: int
    fingerprint: str

    @property
    def n_shards(self) -> int:
        return (self.n + self.shard_size - 1) // self.shard_size

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


class ShardStore:
    """The shards of one side in ``directory`` (see the module docstring)."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        self._manifest: Manifest | None = None

    # ----------------------------------------------------------------- manifest
    @property
    def manifest_path(self) -> Path:
        return self.directory / MANIFEST

    def read_manifest(self) -> Manifest | None:
        if self._manifest is None and self.manifest_path.is_file():
            try:
                data = json.loads(self.manifest_path.read_text(encoding="utf-8"))
                self._manifest = Manifest(**{f: data[f] for f in Manifest.__dataclass_fields__})
            except (ValueError, KeyError, TypeError) as exc:
                raise ResourceError(
                    f"{self.manifest_path}: unreadable shard manifest ({exc}); use a new --workdir "
                    f"or delete {self.directory}"
                ) from exc
        return self._manifest

    @property
    def manifest(self) -> Manifest:
        m = self.read_manifest()
        if m is None:
            raise ResourceError(f"{self.directory}: no shard manifest ({MANIFEST}); encode the corpus first")
        return m

    def check(self, wanted: Manifest) -> None:
        """Raise :class:`ResourceError` when the existing manifest is not ``wanted``."""
        have = self.read_manifest()
        if have is None or have == wanted:
            return
        where = f"{self.directory} holds"
        fix = f"use a new --workdir (or delete {self.directory})"
        if have.dim != wanted.dim:
            raise ResourceError(
                f"{where} {have.dim}-d embeddings from model {have.model!r}, but model {wanted.model!r} "
                f"gives {wanted.dim}-d vectors: {fix}"
            )
        if have.model != wanted.model:
            old_name, new_name = have.model.split("@")[0], wanted.model.split("@")[0]
            if old_name == new_name:
                raise ResourceError(
                    f"{where} embeddings from another version of model {new_name!r} (its weights changed "
                    f"since: {have.model!r}, now {wanted.model!r}): {fix}"
                )
            raise ResourceError(f"{where} embeddings from model {have.model!r}, not {wanted.model!r}: {fix}")
        if have.fingerprint != wanted.fingerprint or have.n != wanted.n:
            raise ResourceError(
                f"{where} embeddings of another input ({have.n} sentences, sha256 {have.fingerprint[:12]}; "
                f"now {wanted.n}, {wanted.fingerprint[:12]}): {fix}"
            )
        raise ResourceError(
            f"{where} {have.dtype} shards of {have.shard_size} rows; this run asks for {wanted.dtype} shards "
            f"of {wanted.shard_size}: rerun with the same --fp16/--shard-size or {fix}"
        )

    def initialise(self, manifest: Manifest) -> None:
        """Check against an existing manifest, or write ``manifest`` to a new directory."""
        if manifest.dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {DTYPES}, got {manifest.dtype!r}")
        if manifest.shard_size < 1:
            raise ValueError(f"shard size must be >= 1, got {manifest.shard_size}")
        self.check(manifest)
        if self.read_manifest() is None:
            self.directory.mkdir(parents=True, exist_ok=True)
            atomic_write_text(self.manifest_path, json.dumps(manifest.to_dict(), indent=2) + "\n")
            self._manifest = manifest

    # ----------------------------------------------------------------- shards
    def shard_path(self, i: int) -> Path:
        return self.directory / f"shard-{i:05d}.npy"

    def bounds(self, i: int) -> tuple[int, int]:
        m = self.manifest
        return i * m.shard_size, min(m.n, (i + 1) * m.shard_size)

    def record_path(self, i: int) -> Path:
        return self.directory / f"shard-{i:05d}.json"

    def _shard_ok(self, i: int, texts: Sequence[str] | None = None) -> bool:
        path = self.shard_path(i)
        if not path.is_file():
            return False
        try:
            arr = np.load(path, mmap_mode="r")
            record = json.loads(self.record_path(i).read_text(encoding="utf-8"))
        except FileNotFoundError:
            logger.warning("%s has no record of its content; it will be encoded again", path)
            return False
        except (ValueError, OSError):
            logger.warning("%s is unreadable; it will be encoded again", path)
            return False
        problem = self._shard_problem(i, arr, record, texts)
        del arr
        if problem:
            logger.warning("%s %s; it will be encoded again", path, problem)
        return problem is None

    def _shard_problem(
        self, i: int, arr: np.ndarray, record: dict, texts: Sequence[str] | None
    ) -> str | None:
        """Why shard ``i`` cannot be reused, or None."""
        start, stop = self.bounds(i)
        if arr.shape != (stop - start, self.manifest.dim) or arr.dtype != np.dtype(self.manifest.dtype):
            return "has the wrong shape or dtype"
        if _array_sha256(arr) != record.get("sha256"):
            return "is not the shard that was written (its bytes changed)"
        if texts is not None and texts_sha256(texts[start:stop]) != record.get("texts_sha256"):
            return "was encoded from other sentences"
        return _values_problem(arr)

    def missing_shards(self, texts: Sequence[str] | None = None) -> list[int]:
        """Shards to encode: absent, or not whole and true (see the module docstring); ``texts``
        (all of the side's sentences) also checks each shard against its sentences."""
        return [i for i in range(self.manifest.n_shards) if not self._shard_ok(i, texts)]

    def is_complete(self) -> bool:
        return self.read_manifest() is not None and not self.missing_shards()

    def write_shard(self, i: int, embeddings: np.ndarray, texts: Sequence[str] | None = None) -> Path:
        """Write shard ``i`` atomically (temp file, then rename), then its record: the sha256 of the
        stored bytes and of ``texts`` (the shard's sentences). Vectors that are not finite unit
        vectors are refused (:class:`ResourceError`)."""
        m = self.manifest
        start, stop = self.bounds(i)
        if embeddings.shape != (stop - start, m.dim):
            raise ValueError(
                f"shard {i} must be {(stop - start, m.dim)}, got {tuple(embeddings.shape)} ({self.directory})"
            )
        path = self.shard_path(i)
        stored = np.ascontiguousarray(embeddings, dtype=m.dtype)
        problem = _values_problem(stored)
        if problem:  # a model that gives NaN would otherwise be re-encoded on every run
            raise ResourceError(
                f"model {m.model!r}: shard {i} (sentences {start + 1}-{stop}) {problem}; it is not written"
            )
        with atomic_path(path) as tmp:
            with open(tmp, "wb") as fh:
                np.save(fh, stored)
            self.record_path(i).unlink(missing_ok=True)  # the old record goes before the old shard
        record = {
            "sha256": _array_sha256(stored),
            "texts_sha256": texts_sha256(texts) if texts is not None else None,
        }
        atomic_write_text(self.record_path(i), json.dumps(record) + "\n")
        return path

    # ----------------------------------------------------------------- Matrix interface
    @property
    def dim(self) -> int:
        return self.manifest.dim

    def __len__(self) -> int:
        return self.manifest.n

    def blocks(self, start: int, stop: int, max_rows: int | None = None) -> Iterator[tuple[int, np.ndarray]]:
        size = self.manifest.shard_size
        stop = min(stop, len(self))
        pos = start
        while pos < stop:
            i = pos // size
            s0 = i * size
            end = min(stop, s0 + size, pos + (max_rows or size))
            arr = np.load(self.shard_path(i), mmap_mode="r")
            piece = np.array(arr[pos - s0 : end - s0], dtype=np.float32)
            del arr  # unmap: touched pages do not stay resident
            yield pos, piece
            pos = end

    def rows(self, start: int, stop: int) -> np.ndarray:
        stop = min(stop, len(self))
        out = np.empty((max(0, stop - start), self.dim), dtype=np.float32)
        for pos, piece in self.blocks(start, stop):
            out[pos - start : pos - start + len(piece)] = piece
        return out

    def take(self, ids: np.ndarray) -> np.ndarray:
        ids = np.asarray(ids, dtype=np.int64).ravel()
        out = np.empty((len(ids), self.dim), dtype=np.float32)
        if len(ids) == 0:
            return out
        size = self.manifest.shard_size
        shard_of = ids // size
        for i in np.unique(shard_of):
            sel = np.nonzero(shard_of == i)[0]
            arr = np.load(self.shard_path(int(i)), mmap_mode="r")
            out[sel] = arr[ids[sel] - int(i) * size]
            del arr
        return out

    def load_all(self) -> np.ndarray:
        """Every row in one float32 array (in memory: only for small corpora and tests)."""
        return self.rows(0, len(self))
