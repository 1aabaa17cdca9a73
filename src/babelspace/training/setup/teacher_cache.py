"""Teacher vectors computed once and kept on disk, keyed by what the teacher is and by text.

Layout: ``<cache>/teacher/<teacher-key>/shard-<time>-<pid>-<uuid>.npz``, each one file holding
both the vectors (float32 [rows, d]) and the sha1 of each row's text, so vectors and keys can
never be mixed across shards. A shard is written under a temporary name (``.tmp-*``, unique per
process) and renamed into place, so readers only ever see complete shards and concurrent runs
sharing one cache never overwrite each other's files; two runs that encode the same text both
store it, harmlessly.

The teacher key is a content hash of the teacher's folder (named offline models resolve to their
folder), so a teacher retrained in place — same path, same file sizes, other weights — gets a new
key instead of stale vectors (:func:`babelspace.hashing.model_content_hash`, memoised by path,
size and mtime). A hub id that is not a local folder is keyed by its name.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
import uuid
import zipfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from sentence_transformers import SentenceTransformer

from babelspace.errors import BabelspaceError
from babelspace.hashing import model_content_hash
from babelspace.models.encoder import encode

logger = logging.getLogger(__name__)


def text_key(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()


def _model_folder(name: str) -> Path | None:
    from babelspace.resources import resolve_model

    try:
        path = Path(resolve_model(name))
    except (BabelspaceError, OSError):
        return None
    return path if path.is_dir() else None


def teacher_key(model: SentenceTransformer, name: str) -> str:
    """Identify a teacher by the content of its weights (or its hub name) and its output
    configuration (modules, max_seq_length, prompts)."""
    h = hashlib.sha1(str(model).encode())
    h.update(str(model.max_seq_length).encode())
    h.update(json.dumps(model.prompts or {}, sort_keys=True).encode())
    folder = _model_folder(name)
    h.update((f"content:{model_content_hash(folder)}" if folder else f"name:{name}").encode())
    return h.hexdigest()[:16]


def _read_shard(path: Path) -> tuple[list[str], np.ndarray] | None:
    try:
        with np.load(path, allow_pickle=False) as z:
            keys = [k.decode("ascii") for k in z["keys"]]
            vecs = np.asarray(z["vecs"], dtype=np.float32)
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as exc:
        logger.warning("ignoring unreadable teacher-cache shard %s (%s)", path, exc)
        return None
    if len(keys) != len(vecs):
        logger.warning("ignoring inconsistent teacher-cache shard %s", path)
        return None
    return keys, vecs


class TeacherCache:
    """Maps English texts to teacher vectors, encoding only what is missing."""

    def __init__(self, teacher: SentenceTransformer, name: str, root: Path, batch_size: int = 64) -> None:
        self.teacher = teacher
        self.dir = Path(root) / "teacher" / teacher_key(teacher, name)
        self.batch_size = batch_size
        self._index: dict[str, tuple[int, int]] = {}
        self._shards: list[np.ndarray] = []
        self._seen: set[str] = set()
        self.hits = 0
        self.encoded = 0
        self._refresh()
        logger.info("teacher cache %s: %d vectors", self.dir, len(self._index))

    def _add(self, keys: list[str], vecs: np.ndarray) -> None:
        shard = len(self._shards)
        self._shards.append(vecs)
        for row, k in enumerate(keys):
            self._index[k] = (shard, row)

    def _refresh(self) -> None:
        """Load the complete shards not loaded yet (other processes may have added some)."""
        if not self.dir.is_dir():
            return
        for path in sorted(self.dir.glob("shard-*.npz")):
            if path.name in self._seen:
                continue
            self._seen.add(path.name)
            found = _read_shard(path)
            if found is not None:
                self._add(*found)

    def __len__(self) -> int:
        return len(self._index)

    def ensure(self, texts: Sequence[str]) -> int:
        """Encode and store every text not cached yet; returns how many were encoded."""
        self._refresh()
        missing: dict[str, str] = {}
        for t in texts:
            k = text_key(t)
            if k not in self._index and k not in missing:
                missing[k] = t
        if not missing:
            return 0
        logger.info("encoding %d new texts with the teacher", len(missing))
        vecs = encode(
            self.teacher, list(missing.values()), batch_size=self.batch_size, show_progress=len(missing) > 200
        )
        self._write_shard(list(missing.keys()), np.asarray(vecs, dtype=np.float32))
        self.encoded += len(missing)
        return len(missing)

    def _write_shard(self, keys: list[str], vecs: np.ndarray) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        unique = f"{time.time_ns()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        tmp = self.dir / f".tmp-{unique}.npz"
        final = self.dir / f"shard-{unique}.npz"
        try:
            with open(tmp, "wb") as fh:
                np.savez(fh, keys=np.array(keys, dtype="S40"), vecs=vecs)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, final)
        except OSError as exc:  # a read-only or full cache costs re-encoding next time, nothing else
            tmp.unlink(missing_ok=True)
            logger.warning(
                "cannot store teacher vectors in %s (%s); they will be re-encoded next run", final, exc
            )
        self._seen.add(final.name)
        self._add(keys, vecs)

    def lookup(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors for ``texts`` (encoding any that are missing)."""
        self.ensure(texts)
        out = np.empty((len(texts), self._shards[0].shape[1]), dtype=np.float32)
        for i, t in enumerate(texts):
            shard, row = self._index[text_key(t)]
            out[i] = self._shards[shard][row]
        self.hits += len(texts)
        return out
