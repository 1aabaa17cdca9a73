"""Parallel pairs, the corpus that holds them, and the report of what a reader kept and skipped."""

from __future__ import annotations

import dataclasses
import hashlib
import logging
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
import xxhash

__all__ = [
    "ParallelCorpus",
    "ParallelPair",
    "ReadReport",
    "normalize_whitespace",
    "one_pair_per_text",
    "text_ids",
    "unique_text_pairs",
]

logger = logging.getLogger(__name__)

#: How many skipped lines per reason are logged one by one before the log goes quiet.
MAX_LOGGED_SKIPS = 5


def normalize_whitespace(s: str) -> str:
    """Collapse every run of (Unicode) whitespace into one space and strip both ends."""
    return " ".join(s.split())


def unique_text_pairs(pairs: Iterable[tuple[str, str]], *, across_sides: bool = False) -> list[int]:
    """Indices of the aligned pairs kept so that no text repeats, in order: a pair is kept when neither
    its source nor its target is in an earlier kept pair (first occurrence wins).

    Retrieval is scored by index, so a repeated text would make its other copies count as errors.
    By default each side is checked against its own side; ``across_sides=True`` checks both texts
    against every text kept on either side.
    """
    seen_src: set[str] = set()
    seen_tgt: set[str] = seen_src if across_sides else set()
    kept: list[int] = []
    for i, (src, tgt) in enumerate(pairs):
        if src in seen_src or tgt in seen_tgt:
            continue
        seen_src.add(src)
        seen_tgt.add(tgt)
        kept.append(i)
    return kept


@dataclass(frozen=True, slots=True)
class ParallelPair:
    """One sentence and its translation.

    ``origin`` says where the pair came from: ``"path:line"`` for files, ``"path:row"`` for datasets,
    ``"bible:<version>:<book>:<chapter>:<verse>"`` for the Bible.
    """

    src: str
    tgt: str
    src_lang: str
    tgt_lang: str
    origin: str

    def __reduce__(self):
        # pickled as its five fields (a loader worker sends every batch's pairs to the trainer): a
        # third of the cost of the slots dataclass's generic state functions
        return (ParallelPair, (self.src, self.tgt, self.src_lang, self.tgt_lang, self.origin))


def text_ids(pairs: Sequence[ParallelPair]) -> np.ndarray:
    """Per pair, the ids of its source and target text ([n, 2] uint64): the xxh3-64 of each text's
    UTF-8 bytes, the id the Arrow cache stores (`babelspace.data.text_blocks.text_hash`), so equal
    texts get equal ids in memory and on disk (different texts collide with negligible probability)."""
    out = np.empty((len(pairs), 2), dtype=np.uint64)
    digest = xxhash.xxh3_64_intdigest
    out[:, 0] = np.fromiter((digest(p.src.encode()) for p in pairs), dtype=np.uint64, count=len(pairs))
    out[:, 1] = np.fromiter((digest(p.tgt.encode()) for p in pairs), dtype=np.uint64, count=len(pairs))
    return out


@dataclass
class ReadReport:
    """What a reader saw: lines read, pairs kept, and pairs skipped per reason."""

    source: str
    read: int = 0
    kept: int = 0
    skipped: dict[str, int] = field(default_factory=dict)

    def add_skip(self, reason: str, where: str) -> None:
        """Count one skipped line; log the first few of each reason with where they were."""
        n = self.skipped.get(reason, 0) + 1
        self.skipped[reason] = n
        if n <= MAX_LOGGED_SKIPS:
            logger.warning("skipped %s: %s", where, reason)
        if n == MAX_LOGGED_SKIPS:
            logger.warning("further lines skipped for %r in %s are counted, not logged", reason, self.source)

    @property
    def total_skipped(self) -> int:
        return sum(self.skipped.values())

    def summary(self) -> str:
        """One line, e.g. ``corpus.tsv: read 100, kept 95, skipped 5 (empty side 3, duplicate 2)``."""
        text = f"{self.source}: read {self.read}, kept {self.kept}, skipped {self.total_skipped}"
        if self.skipped:
            parts = ", ".join(f"{reason} {n}" for reason, n in sorted(self.skipped.items()))
            text += f" ({parts})"
        return text

    def copy(self) -> ReadReport:
        return dataclasses.replace(self, skipped=dict(self.skipped))


@dataclass
class ParallelCorpus:
    """A named list of `ParallelPair` with the report of how it was read."""

    name: str
    pairs: list[ParallelPair]
    report: ReadReport

    def __len__(self) -> int:
        return len(self.pairs)

    def __iter__(self):
        return iter(self.pairs)

    def fingerprint(self) -> str:
        """sha256 (hex) over every pair's texts and languages, in order; stable across runs and machines.

        Origins are not included: the same text read from a moved file has the same fingerprint.
        """
        h = hashlib.sha256()
        for p in self.pairs:
            h.update("\x1f".join((p.src_lang, p.tgt_lang, p.src, p.tgt)).encode("utf-8"))
            h.update(b"\x1e")
        return h.hexdigest()

    def lang_pairs(self) -> dict[tuple[str, str], int]:
        """Number of pairs per (src_lang, tgt_lang), sorted by language pair."""
        counts = Counter((p.src_lang, p.tgt_lang) for p in self.pairs)
        return dict(sorted(counts.items()))

    def dedup(self) -> ParallelCorpus:
        """A new corpus without exact repeats of (src, tgt, src_lang, tgt_lang); first occurrence kept.

        Dropped pairs are counted in ``report.skipped["duplicate"]`` of the new corpus's report.
        """
        seen: set[tuple[str, str, str, str]] = set()
        kept: list[ParallelPair] = []
        report = self.report.copy()
        for p in self.pairs:
            key = (p.src, p.tgt, p.src_lang, p.tgt_lang)
            if key in seen:
                report.skipped["duplicate"] = report.skipped.get("duplicate", 0) + 1
                continue
            seen.add(key)
            kept.append(p)
        report.kept = len(kept)
        dropped = len(self.pairs) - len(kept)
        if dropped:
            logger.info("%s: dropped %d duplicate pairs", self.name, dropped)
        return ParallelCorpus(self.name, kept, report)


def one_pair_per_text(pairs: Iterable[ParallelPair]) -> list[ParallelPair]:
    """Keep a pair only if neither its source nor its target appeared in an earlier kept pair (either
    side): :func:`unique_text_pairs` with ``across_sides=True``."""
    pairs = list(pairs)
    return [pairs[i] for i in unique_text_pairs(((p.src, p.tgt) for p in pairs), across_sides=True)]
