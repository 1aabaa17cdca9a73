"""Teacher vectors computed once and kept on disk, keyed by what the teacher is and by text.

Layout: ``<cache>/teacher/<teacher-key>/shard-<time>-<pid>-<uuid>/`` folders, each holding
``keys.npy`` (the first 16 bytes of the sha1 of each row's text), ``vecs.npy`` (float32
``[rows, d]``) and ``meta.json`` (rows, dimension, whether the vectors are L2-normalised). A
shard is written as a ``.tmp-*`` folder (unique per process) and renamed into place, so readers
only ever see complete shards and concurrent runs sharing one cache never overwrite each other's
files; two runs that encode the same text both store it, harmlessly.

At scale (:func:`encode_shared`): the texts a run needs are streamed, never held as one list; under
torchrun a text belongs to rank *key* mod *world* (keys are hashes, so the shares are even and no
two ranks encode one text). Each rank encodes the missing texts of its share ``shard_texts`` at a
time and writes each batch as its own shard as soon as it is encoded, so a kill loses at most one
shard per rank and a rerun encodes only what is missing. Vectors are read through
``np.load(mmap_mode="r")``: the cache costs memory for its index (24 bytes per text), not for the
vectors, which the operating system pages in as batches need them. A memory map holds a file
descriptor, so shards are mapped on first use, the soft open-files limit is raised to the hard
one, and at most half of it stays mapped (the least recently used are unmapped beyond that).

Every shard a run uses is checked before use: shape, dtype, the teacher's dimension, finite
values and unit norms. A shard that fails is ignored with a warning naming it and the reason, and
its texts are encoded again; a teacher that itself produces non-finite vectors stops the run with
one line (a NaN target would train and export a NaN model).

The teacher key is a content hash of the teacher's folder (named offline models resolve to their
folder), so a teacher retrained in place — same path, same file sizes, other weights — gets a new
key instead of stale vectors (:func:`babelspace.hashing.model_content_hash`, memoised by path,
size and mtime). A hub id that is not a local folder is keyed by its name.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

import numpy as np
from sentence_transformers import SentenceTransformer

from babelspace.errors import TrainingError
from babelspace.models.encoder import embedding_dim, encode
from babelspace.models.identity import model_identity
from babelspace.training.setup.teacher_shards import (
    KEY_BYTES,
    KEY_DTYPE,
    READ_ERRORS,
    Shard,
    mappable_shards,
    open_shard,
    shard_problem,
    write_shard,
)

logger = logging.getLogger(__name__)

#: Texts per shard: what a kill can lose, and the unit of work one rank takes at a time.
SHARD_TEXTS = 10_000
#: Texts read at a time when a stream of texts is checked against the cache.
STREAM_CHUNK = 65_536


def text_key(text: str) -> bytes:
    """A text's key: the first 16 bytes of its sha1."""
    return hashlib.sha1(text.encode("utf-8")).digest()[:KEY_BYTES]


def _keys_of(texts: Sequence[str]) -> np.ndarray:
    return np.array([text_key(t) for t in texts], dtype=KEY_DTYPE)


def chunked(items: Iterable[str], n: int) -> Iterator[list[str]]:
    """``items`` as lists of ``n`` (the last one shorter), read lazily."""
    it = iter(items)
    while chunk := list(itertools.islice(it, n)):
        yield chunk


def _owner(keys: np.ndarray, world: int) -> np.ndarray:
    """The rank that encodes each key: its first 8 bytes mod ``world``."""
    return np.ascontiguousarray(keys).view(np.uint64).reshape(-1, 2)[:, 0] % np.uint64(world)


class _KeySet:
    """A growing set of keys (16 bytes each, nothing per key in Python objects): sorted levels
    merged like a binary counter, so adding n keys costs O(n log n) and a lookup O(log^2 n)."""

    def __init__(self) -> None:
        self.levels: list[np.ndarray] = []

    def contains(self, keys: np.ndarray) -> np.ndarray:
        found = np.zeros(len(keys), dtype=bool)
        for level in self.levels:
            pos = np.minimum(np.searchsorted(level, keys), len(level) - 1)
            found |= level[pos] == keys
        return found

    def add(self, keys: np.ndarray) -> None:
        new = np.unique(keys)
        new = new[~self.contains(new)]
        while self.levels and len(self.levels[-1]) <= len(new):
            new = np.union1d(self.levels.pop(), new)
        if len(new):
            self.levels.append(new)


def teacher_key(model: SentenceTransformer, name: str, normalize: bool = True) -> str:
    """Identify a teacher by the content of its weights (or its hub name) and its output
    configuration (modules, max_seq_length, prompts, and raw vectors when not normalised)."""
    h = hashlib.sha1(str(model).encode())
    if not normalize:
        h.update(b"raw")
    h.update(str(model.max_seq_length).encode())
    h.update(json.dumps(model.prompts or {}, sort_keys=True).encode())
    content = model_identity(name).content_hash
    h.update((f"content:{content}" if content else f"name:{name}").encode())
    return h.hexdigest()[:16]


class TeacherCache:
    """Maps English texts to teacher vectors, encoding only what is missing. With
    ``normalize=False`` it holds a model's raw vectors: the untrained student's features that the
    closed-form projection fit reads (``name``: the model's spec, whose folder content is hashed)."""

    def __init__(
        self,
        teacher: SentenceTransformer,
        name: str,
        root: Path,
        batch_size: int = 64,
        shard_texts: int = SHARD_TEXTS,
        normalize: bool = True,
    ) -> None:
        self.teacher = teacher
        self.name = name
        self.normalize = normalize
        self.dim = embedding_dim(teacher)
        self.dir = Path(root) / "teacher" / teacher_key(teacher, name, normalize)
        self.batch_size = batch_size
        self.shard_texts = shard_texts
        self._shards: list[Shard] = []
        self._pending: list[tuple[int, np.ndarray]] = []  # (shard, keys) not indexed yet
        self._mapped: OrderedDict[int, None] = OrderedDict()  # mapped shards, least recent first
        self._max_mapped = mappable_shards()
        self._seen: set[str] = set()
        self._sorted = np.zeros(0, dtype=KEY_DTYPE)  # every cached key, sorted
        self._where = np.zeros(0, dtype=np.int64)  # shard << 32 | row, aligned with _sorted
        self.hits = 0
        self.encoded = 0
        self.refresh()
        logger.info("teacher cache %s: %d vectors", self.dir, len(self))

    # ------------------------------------------------------------------ the index
    def refresh(self) -> None:
        """Open the complete shards not opened yet (other processes may have added some)."""
        if not self.dir.is_dir():
            return
        added = False
        for path in sorted(self.dir.glob("shard-*/")):
            if path.name in self._seen or not (path / "meta.json").exists():
                continue
            self._seen.add(path.name)
            opened = open_shard(path)
            if opened is not None:
                self._add_shard(*opened)
                added = True
        if added:
            self._reindex()

    def _add_shard(self, shard: Shard, keys: np.ndarray) -> None:
        self._pending.append((len(self._shards), np.asarray(keys, dtype=KEY_DTYPE)))
        self._shards.append(shard)

    def _reindex(self) -> None:
        """Merge the keys of the shards added since the last call into the sorted index."""
        keys, where = [self._sorted], [self._where]
        for i, k in self._pending:
            keys.append(k)
            where.append((np.int64(i) << 32) | np.arange(len(k), dtype=np.int64))
        self._pending = []
        all_keys, all_where = np.concatenate(keys), np.concatenate(where)
        order = np.argsort(all_keys, kind="stable")
        self._sorted, self._where = all_keys[order], all_where[order]

    def _vectors(self, i: int) -> np.ndarray:
        """Shard ``i``'s vectors, memory-mapped on first use (the least recently used maps are
        released beyond ``_max_mapped``)."""
        shard = self._shards[i]
        if shard.mapped:
            if shard.vecs is None:
                shard.vecs = np.load(shard.path / "vecs.npy", mmap_mode="r", allow_pickle=False)
            self._mapped[i] = None
            self._mapped.move_to_end(i)
            while len(self._mapped) > self._max_mapped:
                old, _ = self._mapped.popitem(last=False)
                self._shards[old].vecs = None
        assert shard.vecs is not None
        return shard.vecs

    def _locate(self, keys: np.ndarray) -> np.ndarray:
        """``shard << 32 | row`` of each key, -1 where it is not cached."""
        pos = np.searchsorted(self._sorted, keys)
        pos = np.minimum(pos, max(len(self._sorted) - 1, 0))
        found = self._sorted[pos] == keys if len(self._sorted) else np.zeros(len(keys), dtype=bool)
        return np.where(found, self._where[pos] if len(self._where) else -1, -1)

    def _drop_bad(self, where: np.ndarray) -> bool:
        """Check the shards that ``where`` uses (once each); forget those that fail."""
        dropped = False
        for i in np.unique(where[where >= 0] >> 32):
            shard = self._shards[int(i)]
            if shard.checked:
                continue
            try:
                self._vectors(int(i))
                problem = shard_problem(shard, self.dim)
            except READ_ERRORS as exc:
                problem = f"unreadable ({exc})"
            if problem is None:
                shard.checked = True
                continue
            logger.warning(
                "ignoring teacher-cache shard %s: %s; its texts are encoded again", shard.path, problem
            )
            keep = (self._where >> 32) != int(i)
            self._sorted, self._where = self._sorted[keep], self._where[keep]
            dropped = True
        return dropped

    def _checked_locate(self, keys: np.ndarray) -> np.ndarray:
        where = self._locate(keys)
        while self._drop_bad(where):
            where = self._locate(keys)
        return where

    def __len__(self) -> int:
        return len(np.unique(self._sorted)) if len(self._sorted) else 0

    # ------------------------------------------------------------------ encoding
    def missing(self, texts: Sequence[str]) -> list[str]:
        """The distinct texts of ``texts`` with no usable cached vector, in first-seen order."""
        self.refresh()
        where = self._checked_locate(_keys_of(texts))
        return list(dict.fromkeys(t for t, w in zip(texts, where, strict=True) if w < 0))

    def encode_share(self, texts: Iterable[str], rank: int = 0, world: int = 1) -> int:
        """Encode the texts of the stream ``texts`` that are not cached and fall to ``rank`` (key
        mod ``world``), each once, ``shard_texts`` at a time, writing one shard per batch as soon as
        it is encoded. Returns how many texts this rank encoded."""
        self.refresh()
        queued, todo, done = _KeySet(), [], 0
        for chunk in chunked(texts, STREAM_CHUNK):
            keys = _keys_of(chunk)
            new = np.flatnonzero((_owner(keys, world) == rank) & (self._checked_locate(keys) < 0))
            new = new[~queued.contains(keys[new])]
            _, first = np.unique(keys[new], return_index=True)
            new = new[np.sort(first)]  # each text once, in first-seen order
            queued.add(keys[new])
            todo += [chunk[i] for i in new]
            while len(todo) >= self.shard_texts:
                done += self._encode_shard(todo[: self.shard_texts])
                todo = todo[self.shard_texts :]
        if todo:
            done += self._encode_shard(todo)
        if done:
            self._reindex()
            logger.info("encoded %d new texts with the teacher (process %d of %d)", done, rank, world)
        return done

    def _encode_shard(self, texts: list[str]) -> int:
        vecs = encode(
            self.teacher,
            texts,
            batch_size=self.batch_size,
            show_progress=len(texts) > 200,
            normalize=self.normalize,
        )
        self._refuse_nonfinite(texts, vecs)
        self._write_shard(_keys_of(texts), vecs)
        self.encoded += len(texts)
        return len(texts)

    def ensure(self, texts: Sequence[str]) -> int:
        """Encode and store every text not cached yet (all in this process); returns how many."""
        return self.encode_share(texts)

    def _refuse_nonfinite(self, texts: Sequence[str], vecs: np.ndarray) -> None:
        bad = ~np.isfinite(vecs).all(axis=1)
        if bad.any():
            first = texts[int(np.argmax(bad))]
            raise TrainingError(
                f"the teacher {self.name} produced non-finite vectors for {int(bad.sum())} of {len(texts)} "
                f"texts (first: {first[:60]!r}); they cannot be distillation targets: check the teacher model"
            )

    def _write_shard(self, keys: np.ndarray, vecs: np.ndarray) -> None:
        shard = write_shard(self.dir, keys, vecs, self.normalize)
        self._seen.add(shard.path.name)
        self._add_shard(shard, keys)

    # ------------------------------------------------------------------ reading
    def lookup(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors for ``texts`` (encoding any that are missing), read shard by shard."""
        keys = _keys_of(texts)
        where = self._checked_locate(keys)
        if (where < 0).any():
            self.ensure([t for t, w in zip(texts, where, strict=True) if w < 0])
            where = self._checked_locate(keys)
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        shard_of, row_of = where >> 32, where & 0xFFFFFFFF
        for s in np.unique(shard_of):
            rows = np.flatnonzero(shard_of == s)
            out[rows] = self._vectors(int(s))[row_of[rows]]
        self.hits += len(texts)
        return out


def encode_shared(
    cache: TeacherCache,
    texts: Callable[[], Iterable[str]],
    rank: int,
    world: int,
    barrier: Callable[[], None],
) -> None:
    """Make ``cache`` hold every text of the stream ``texts()`` with every process of a torchrun
    job encoding its share (:meth:`TeacherCache.encode_share`), then wait for the others and read
    their shards. ``texts()`` is never held whole. With several processes it is read a second time:
    whatever is still missing then (another rank could not write to a read-only cache) is encoded
    locally. One process has encoded everything in the first pass (vectors it could not write stay
    in memory for the run)."""
    cache.encode_share(texts(), rank, world)
    barrier()
    if world == 1:
        return
    cache.refresh()
    for chunk in chunked(texts(), STREAM_CHUNK):
        cache.ensure(chunk)
