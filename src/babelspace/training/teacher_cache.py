"""Teacher vectors computed once and kept on disk, keyed by teacher and text.

Layout: ``<cache>/teacher/<teacher-key>/shard-<n>.npy`` (float32 [rows, d]) beside
``shard-<n>.keys`` (one sha1 of the text per row). Shards are written to a temporary name and
renamed, so an interrupted run never leaves a half-written shard behind; later runs (and resumed
runs) reuse every vector already there and encode only the texts they have not seen.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from sentence_transformers import SentenceTransformer

from babelspace.encoder import encode

logger = logging.getLogger(__name__)


def text_key(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()


def teacher_key(model: SentenceTransformer, name: str) -> str:
    """Identify a teacher by its name, weights' sizes/mtimes and output configuration."""
    h = hashlib.sha1(name.encode())
    h.update(str(model).encode())
    h.update(str(model.max_seq_length).encode())
    h.update(json.dumps(model.prompts or {}, sort_keys=True).encode())
    path = Path(name)
    if path.is_dir():
        for f in sorted(path.rglob("*.safetensors")) + sorted(path.rglob("*.bin")):
            st = f.stat()
            h.update(f"{f.name}:{st.st_size}".encode())
    return h.hexdigest()[:16]


class TeacherCache:
    """Maps English texts to teacher vectors, encoding only what is missing."""

    def __init__(self, teacher: SentenceTransformer, name: str, root: Path, batch_size: int = 64) -> None:
        self.teacher = teacher
        self.dir = Path(root) / "teacher" / teacher_key(teacher, name)
        self.batch_size = batch_size
        self._index: dict[str, tuple[int, int]] = {}
        self._shards: list[np.ndarray] = []
        self.hits = 0
        self.encoded = 0
        self._load()

    def _load(self) -> None:
        if not self.dir.exists():
            return
        for keys_path in sorted(self.dir.glob("shard-*.keys")):
            vec_path = keys_path.with_suffix(".npy")
            if not vec_path.exists():
                continue
            keys = keys_path.read_text().split()
            vecs = np.load(vec_path, mmap_mode="r")
            if len(keys) != len(vecs):
                logger.warning("ignoring inconsistent teacher-cache shard %s", vec_path)
                continue
            shard = len(self._shards)
            self._shards.append(vecs)
            for row, k in enumerate(keys):
                self._index[k] = (shard, row)
        logger.info("teacher cache %s: %d vectors", self.dir, len(self._index))

    def __len__(self) -> int:
        return len(self._index)

    def ensure(self, texts: Sequence[str]) -> int:
        """Encode and store every text not cached yet; returns how many were encoded."""
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
        self._write_shard(list(missing.keys()), vecs)
        self.encoded += len(missing)
        return len(missing)

    def _write_shard(self, keys: list[str], vecs: np.ndarray) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        n = len(list(self.dir.glob("shard-*.npy")))
        while (self.dir / f"shard-{n:05d}.npy").exists():
            n += 1
        base = self.dir / f"shard-{n:05d}"
        tmp_vec = base.with_suffix(".npy.tmp")
        with open(tmp_vec, "wb") as fh:
            np.save(fh, vecs.astype(np.float32))
        tmp_keys = base.with_suffix(".keys.tmp")
        tmp_keys.write_text("\n".join(keys) + "\n")
        os.replace(tmp_vec, base.with_suffix(".npy"))
        os.replace(tmp_keys, base.with_suffix(".keys"))  # keys last: a shard counts once both exist
        shard = len(self._shards)
        self._shards.append(vecs.astype(np.float32))
        for row, k in enumerate(keys):
            self._index[k] = (shard, row)

    def lookup(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors for ``texts`` (encoding any that are missing)."""
        self.ensure(texts)
        out = np.empty((len(texts), self._shards[0].shape[1]), dtype=np.float32)
        for i, t in enumerate(texts):
            shard, row = self._index[text_key(t)]
            out[i] = self._shards[shard][row]
        self.hits += len(texts)
        return out
