"""The training set: one representation, several corpora (some memory-mapped), seen through
integer arrays.

`PairParts` concatenates in-memory pair lists (the Bible, the built-in sources) and `CorpusRows` of
converted corpora (`babelspace.data.arrow_corpus`). It is a sequence of `ParallelPair` that builds
pairs only for the indices asked for (`PairParts.take`), and answers what the sampler, the dev split
and the summary need (language pairs, lengths, text ids, identical pairs) from integer arrays, so a
process never holds one Python object per pair of a large corpus. `IndexedCorpus` is the
`ParallelCorpus` that holds such parts: every training run's set, whether its parts are all in memory
(the default Bible + sources mix) or not, so sampling, the dev split, the fit samples and the token
cache have one code path.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import xxhash

from babelspace.data.arrow_corpus import CorpusRows
from babelspace.data.mix import source_of
from babelspace.data.pairs import ParallelCorpus, ParallelPair, ReadReport, text_ids
from babelspace.data.sampling import PairArrays

__all__ = ["IndexedCorpus", "PairParts"]

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


@dataclass
class _Part:
    """One corpus of the training set: its source name and its pairs (a list or `CorpusRows`)."""

    source: str
    pairs: Sequence[ParallelPair]

    def lang_pairs(self) -> tuple[list[tuple[str, str]], np.ndarray]:
        """The part's language pairs and, per pair, the index of its language pair."""
        if isinstance(self.pairs, CorpusRows):
            corpus = self.pairs.corpus
            return list(corpus.lang_pairs), corpus.column("lang_pair", self.pairs.rows).astype(np.int64)
        names: dict[tuple[str, str], int] = {}
        codes = [names.setdefault((p.src_lang, p.tgt_lang), len(names)) for p in self.pairs]
        return list(names), np.asarray(codes, dtype=np.int64)

    def lengths(self) -> np.ndarray:
        if isinstance(self.pairs, CorpusRows):
            return self.pairs.corpus.column("src_length", self.pairs.rows).astype(np.int64)
        return np.fromiter((len(p.src) for p in self.pairs), dtype=np.int64, count=len(self.pairs))

    def text_ids(self) -> np.ndarray:
        if isinstance(self.pairs, CorpusRows):
            return self.pairs.corpus.column("text_id", self.pairs.rows)
        return text_ids(self.pairs)

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


class IndexedCorpus(ParallelCorpus):
    """The training set: a `ParallelCorpus` over `PairParts` (one part per ``--data`` source, in
    memory or memory-mapped); language pairs and fingerprint from integer arrays."""

    pairs: PairParts

    @classmethod
    def from_pairs(
        cls, name: str, pairs: Sequence[ParallelPair], report: ReadReport | None = None
    ) -> IndexedCorpus:
        """A training set of in-memory pairs, one part per source (`babelspace.data.mix.source_of`
        of each pair's origin, in order of first appearance; each part keeps its pairs' order)."""
        by_source: dict[str, list[ParallelPair]] = {}
        for pair in pairs:
            by_source.setdefault(source_of(pair), []).append(pair)
        return cls(name, PairParts(list(by_source.items())), report or ReadReport(name))

    def lang_pairs(self) -> dict[tuple[str, str], int]:
        names, codes = self.pairs.lang_pairs()
        counts = np.bincount(codes, minlength=len(names))
        return {name: int(c) for name, c in zip(names, counts, strict=True) if c}

    def fingerprint(self) -> str:
        return self.pairs.fingerprint()
