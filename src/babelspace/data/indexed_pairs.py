"""A training set made of several corpora, some memory-mapped, seen through integer arrays.

`PairParts` concatenates in-memory pair lists (the Bible, the built-in sources) and `CorpusRows` of
converted corpora (`babelspace.data.arrow_corpus`). It is a sequence of `ParallelPair` that builds
pairs only for the indices asked for (`PairParts.take`), and answers what the sampler, the dev split
and the summary need (language pairs, lengths, text ids, identical pairs) from integer arrays, so a
process never holds one Python object per pair of a large corpus. `IndexedCorpus` is the
`ParallelCorpus` that holds such parts.
"""

from __future__ import annotations

import random
from collections.abc import Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import xxhash

from babelspace.data.arrow_corpus import CorpusRows
from babelspace.data.pairs import ParallelCorpus, ParallelPair
from babelspace.data.sampling import PairArrays

__all__ = ["IndexedCorpus", "PairParts", "stratified_sample"]

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def _text_hashes(texts: Sequence[str]) -> np.ndarray:
    return np.fromiter(
        (xxhash.xxh3_64_intdigest(t.encode()) for t in texts), dtype=np.uint64, count=len(texts)
    )


@dataclass
class _Part:
    """One corpus of the training set: its source name and its pairs (a list or `CorpusRows`)."""

    source: str
    pairs: Sequence[ParallelPair]

    def lang_pairs(self) -> tuple[list[tuple[str, str]], np.ndarray]:
        """The part's language pairs and, per pair, the index of its language pair."""
        if isinstance(self.pairs, CorpusRows):
            corpus = self.pairs.corpus
            return list(corpus.lang_pairs), np.asarray(corpus.lang_pair[self.pairs.rows], dtype=np.int64)
        names: dict[tuple[str, str], int] = {}
        codes = [names.setdefault((p.src_lang, p.tgt_lang), len(names)) for p in self.pairs]
        return list(names), np.asarray(codes, dtype=np.int64)

    def lengths(self) -> np.ndarray:
        if isinstance(self.pairs, CorpusRows):
            return np.asarray(self.pairs.corpus.src_length[self.pairs.rows], dtype=np.int64)
        return np.fromiter((len(p.src) for p in self.pairs), dtype=np.int64, count=len(self.pairs))

    def text_ids(self) -> np.ndarray:
        if isinstance(self.pairs, CorpusRows):
            return np.asarray(self.pairs.corpus.text_id[self.pairs.rows])
        out = np.empty((len(self.pairs), 2), dtype=np.uint64)
        out[:, 0] = _text_hashes([p.src for p in self.pairs])
        out[:, 1] = _text_hashes([p.tgt for p in self.pairs])
        return out

    def take(self, idx: np.ndarray) -> list[ParallelPair]:
        if isinstance(self.pairs, CorpusRows):
            return self.pairs.take(idx)
        return [self.pairs[i] for i in idx.tolist()]

    def subset(self, idx: np.ndarray) -> _Part:
        if isinstance(self.pairs, CorpusRows):
            return _Part(self.source, self.pairs.subset(idx))
        return _Part(self.source, [self.pairs[i] for i in idx.tolist()])

    def fingerprint(self) -> str:
        if isinstance(self.pairs, CorpusRows):
            h = xxhash.xxh3_128(self.pairs.corpus.folder.name.encode())
            h.update(np.ascontiguousarray(self.pairs.rows).tobytes())
            return h.hexdigest()
        return ParallelCorpus(self.source, list(self.pairs), None).fingerprint()  # type: ignore[arg-type]


class PairParts(Sequence[ParallelPair]):
    """Several corpora as one sequence of pairs (indices run through the parts in order)."""

    def __init__(self, parts: Sequence[tuple[str, Sequence[ParallelPair]]]) -> None:
        self.parts: list[_Part] = []
        for source, pairs in parts:
            if isinstance(pairs, PairParts):  # nested: its own parts, with their sources
                self.parts += pairs.parts
            elif len(pairs):
                self.parts.append(_Part(source, pairs))
        self.offsets = np.cumsum([0] + [len(p.pairs) for p in self.parts])

    def __len__(self) -> int:
        return int(self.offsets[-1])

    def __getitem__(self, i):  # type: ignore[override]
        if isinstance(i, slice):
            return self.take(np.arange(len(self))[i])
        if not -len(self) <= i < len(self):
            raise IndexError(i)
        return self.take(np.array([i % len(self)]))[0]

    def __iter__(self) -> Iterator[ParallelPair]:
        for part in self.parts:
            yield from part.pairs

    def _split(self, idx: np.ndarray) -> list[tuple[int, np.ndarray]]:
        """(part, positions in ``idx``) for every part that ``idx`` reaches."""
        which = np.searchsorted(self.offsets, idx, side="right") - 1
        return [(k, np.flatnonzero(which == k)) for k in np.unique(which).tolist()]

    def take(self, idx: Sequence[int] | np.ndarray) -> list[ParallelPair]:
        """The pairs at ``idx``, in that order; only these are built."""
        idx = np.asarray(idx, dtype=np.int64)
        out: list[ParallelPair | None] = [None] * len(idx)
        for k, positions in self._split(idx):
            for pos, pair in zip(
                positions.tolist(), self.parts[k].take(idx[positions] - self.offsets[k]), strict=True
            ):
                out[pos] = pair
        return out  # type: ignore[return-value]

    def subset(self, idx: np.ndarray) -> PairParts:
        """The pairs at the increasing indices ``idx`` (still memory-mapped where they were)."""
        idx = np.asarray(idx, dtype=np.int64)
        return PairParts(
            [
                (self.parts[k].source, self.parts[k].subset(idx[pos] - self.offsets[k]).pairs)
                for k, pos in self._split(idx)
            ]
        )

    # ------------------------------------------------------------------ integer views
    def lang_pairs(self) -> tuple[list[tuple[str, str]], np.ndarray]:
        """The language pairs (sorted) and, per pair, the index of its language pair."""
        return self._groups(lambda part, lp: lp)

    def groups(self, by_source: bool) -> tuple[list[Hashable], np.ndarray]:
        """Sampler groups, sorted: ``(src_lang, tgt_lang)``, or ``(source, src_lang, tgt_lang)``."""
        if by_source:
            return self._groups(lambda part, lp: (part.source, *lp))
        return self._groups(lambda part, lp: lp)

    def _groups(self, name_of) -> tuple[list, np.ndarray]:
        local = [part.lang_pairs() for part in self.parts]
        names = sorted(
            {name_of(part, lp) for part, (lps, _) in zip(self.parts, local, strict=True) for lp in lps}
        )
        index = {name: i for i, name in enumerate(names)}
        codes = [
            np.asarray([index[name_of(part, lp)] for lp in lps], dtype=np.int64)[c]
            for part, (lps, c) in zip(self.parts, local, strict=True)
        ]
        return names, np.concatenate(codes) if codes else np.zeros(0, dtype=np.int64)

    def lengths(self) -> np.ndarray:
        return np.concatenate([part.lengths() for part in self.parts])

    def text_ids(self) -> np.ndarray:
        return np.concatenate([part.text_ids() for part in self.parts])

    def arrays(self, by_source: bool, texts: bool) -> PairArrays:
        names, codes = self.groups(by_source)
        return PairArrays(codes, names, self.lengths(), self.text_ids() if texts else None)

    def pair_keys(self) -> np.ndarray:
        """One uint64 per pair, equal for pairs with equal (source, target) texts."""
        ids = self.text_ids()
        return ids[:, 0] ^ (ids[:, 1] * _GOLDEN)

    def identical(self) -> np.ndarray:
        """Per pair: its target copies its source across two languages."""
        names, codes = self.lang_pairs()
        cross = np.array([s != t for s, t in names], dtype=bool)[codes]
        ids = self.text_ids()
        return cross & (ids[:, 0] == ids[:, 1])

    def fingerprint(self) -> str:
        h = xxhash.xxh3_128()
        for part in self.parts:
            h.update(part.fingerprint().encode())
        return h.hexdigest()


def stratified_sample(codes: np.ndarray, n_groups: int, max_pairs: int, seed: int) -> np.ndarray:
    """Sorted indices of a seeded random subset of at most ``max_pairs``, stratified by ``codes``
    (largest remainder): the indices `babelspace.data.readers.subsample` keeps for the same groups
    in the same sorted order and seed."""
    n = len(codes)
    if n <= max_pairs:
        return np.arange(n, dtype=np.int64)
    members = np.split(
        np.argsort(codes, kind="stable"), np.cumsum(np.bincount(codes, minlength=n_groups))[:-1]
    )
    sizes = np.array([len(m) for m in members])
    exact = sizes * max_pairs / n
    quota = exact.astype(np.int64)
    leftover = max_pairs - int(quota.sum())
    for k in sorted(range(n_groups), key=lambda k: (-(exact[k] - quota[k]), k))[:leftover]:
        quota[k] += 1
    rng = random.Random(seed)
    chosen = [m[rng.sample(range(len(m)), int(q))] for m, q in zip(members, quota, strict=True)]
    return np.sort(np.concatenate(chosen)) if chosen else np.zeros(0, dtype=np.int64)


class IndexedCorpus(ParallelCorpus):
    """A `ParallelCorpus` over `PairParts`: language pairs and fingerprint from integer arrays."""

    pairs: PairParts

    def lang_pairs(self) -> dict[tuple[str, str], int]:
        names, codes = self.pairs.lang_pairs()
        counts = np.bincount(codes, minlength=len(names))
        return {name: int(c) for name, c in zip(names, counts, strict=True) if c}

    def fingerprint(self) -> str:
        return self.pairs.fingerprint()


def group_weights(names: Sequence[Hashable], mix: Mapping[str, float]) -> dict[Hashable, float]:
    """`babelspace.data.mix.group_weights_for` from group names ``(source, src_lang, tgt_lang)``:
    a source's weight split equally among its language pairs (sources not in ``mix`` weigh 1)."""
    per_source: dict[str, int] = {}
    for name in names:
        per_source[name[0]] = per_source.get(name[0], 0) + 1  # type: ignore[index]
    return {name: mix.get(name[0], 1.0) / per_source[name[0]] for name in names}  # type: ignore[index]
