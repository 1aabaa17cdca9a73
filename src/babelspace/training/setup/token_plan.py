"""Which token tables a training run reads its batches' token ids from (``--token-cache``), and the
lookup the input pipeline makes for each forward pass.

Every part of the training set has its table (`babelspace.data.token_cache`): a converted corpus
one for the whole corpus, in ``<corpus folder>/tokens/<tokenizer key>/`` (its sources then its
targets, in row order, whichever rows the run uses); an in-memory list (the Bible, the built-in
sources, mined pairs) one of its distinct texts, in ``<cache>/tokens/<tokenizer key>/<content
key>/`` (the content key hashes the list's texts in order). The tokenizer key
(`babelspace.models.token_ids.tokenizer_key`) covers the tokenizer, the max length and the prompt,
so a table never serves another of them.

``--token-cache auto`` (the default) reads the tables that exist and builds the missing ones when
that tokenizes no more texts than the run would tokenize step by step (2 per planned pair); ``on``
builds them whatever the run's length; ``off`` tokenizes every batch. Before the first step the
features rebuilt from the ids of sample rows of every table are compared with the tokenizer's own
(`IdLayout.difference`): a model they do not reproduce (a slow tokenizer, other features) tokenizes
its batches, said in one line, as does a run whose table cannot be written.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import xxhash

from babelspace.data.arrow_corpus import CorpusRows
from babelspace.data.indexed_pairs import IndexedCorpus
from babelspace.data.pairs import ParallelPair
from babelspace.data.token_cache import TokenTable, cached_table, distinct_texts, open_table, write_table
from babelspace.errors import ResourceError
from babelspace.models.token_ids import CachedIds, IdLayout, encode_ids, tokenizer_key
from babelspace.objectives.base import Objective

__all__ = ["TrainTokens", "train_tokens"]

logger = logging.getLogger(__name__)

#: Rows of each table whose rebuilt features are compared with the tokenizer's before training.
CHECK_ROWS = 16


class _Part:
    """One part of the training set: where its table lives, how to build it, its rows in it."""

    def __init__(self, start: int, pairs: Sequence[ParallelPair], root: Path, key: str) -> None:
        self.start, self.pairs = start, pairs
        if isinstance(pairs, CorpusRows):
            self.label = pairs.corpus.label
            self.folder = pairs.corpus.folder / "tokens" / key
            self.rows: np.ndarray | None = pairs.rows
        else:
            self.label = "in-memory pairs"
            self.folder = root / "tokens" / key / _content_key(pairs)
            self.rows = None
        self._distinct: tuple[list[str], np.ndarray, np.ndarray] | None = None

    def texts_to_build(self) -> int:
        if isinstance(self.pairs, CorpusRows):
            return 2 * len(self.pairs.corpus)
        return len(self.distinct()[0])

    def distinct(self) -> tuple[list[str], np.ndarray, np.ndarray]:
        if self._distinct is None:
            self._distinct = distinct_texts(self.pairs)
        return self._distinct

    def write(self, folder: Path, encode, key: str) -> None:
        if isinstance(self.pairs, CorpusRows):
            corpus = self.pairs.corpus
            chunks = itertools.chain(corpus.texts(0), corpus.texts(1))
            write_table(folder, chunks, (len(corpus), 2 * len(corpus)), encode, key, self.label)
            return
        texts, src, tgt = self.distinct()
        write_table(folder, [texts], (len(self.pairs), len(texts)), encode, key, self.label, (src, tgt))

    def sample(self) -> np.ndarray:
        """Evenly spaced indices of the part's pairs (its first and last included)."""
        n = len(self.pairs)
        return np.unique(np.linspace(0, n - 1, min(n, CHECK_ROWS)).astype(np.int64))

    def pairs_at(self, local: np.ndarray) -> list[ParallelPair]:
        if isinstance(self.pairs, CorpusRows):
            return self.pairs.take(local)
        return [self.pairs[i] for i in local.tolist()]


def _content_key(pairs: Sequence[ParallelPair]) -> str:
    h = xxhash.xxh3_128()
    for p in pairs:
        h.update(p.src.encode())
        h.update(b"\x00")
        h.update(p.tgt.encode())
        h.update(b"\x01")
    return h.hexdigest()


@dataclass
class TrainTokens:
    """The token ids of the training set's pairs, by training-set index, from the parts' tables."""

    starts: np.ndarray  # each part's first index in the training set
    tables: list[TokenTable]
    rows: list[np.ndarray | None]  # per part, the table row of each of its pairs (None: its index)
    layout: IdLayout

    def ids(self, idx: Sequence[int] | np.ndarray) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """The source and target ids of the pairs at ``idx`` (training-set indices), in that order."""
        idx = np.asarray(idx, dtype=np.int64)
        which = np.searchsorted(self.starts, idx, side="right") - 1
        src: list[np.ndarray] = [None] * len(idx)  # type: ignore[list-item]
        tgt: list[np.ndarray] = [None] * len(idx)  # type: ignore[list-item]
        for k in np.unique(which).tolist():
            pos = np.flatnonzero(which == k)
            local = idx[pos] - self.starts[k]
            rows = local if self.rows[k] is None else self.rows[k][local]
            table = self.tables[k]
            for out, side in ((src, 0), (tgt, 1)):
                for i, ids in zip(pos.tolist(), table.lookup(table.text_index(rows, side)), strict=True):
                    out[i] = ids
        return src, tgt

    def lookup(self, idx: Sequence[int] | np.ndarray, pairs: Sequence[ParallelPair]) -> CachedIds:
        """The ids of the texts of ``pairs`` (the pairs at ``idx``), by text."""
        src, tgt = self.ids(idx)
        by_text = {p.src: ids for p, ids in zip(pairs, src, strict=True)}
        by_text.update((p.tgt, ids) for p, ids in zip(pairs, tgt, strict=True))
        return CachedIds(by_text, self.layout)


def _parts(train: IndexedCorpus, root: Path, key: str) -> list[_Part]:
    parts = train.pairs
    return [_Part(int(s), p.pairs, root, key) for s, p in zip(parts.offsets, parts.parts, strict=False)]


def _keyed_layout(objective: Objective) -> tuple[str, IdLayout] | str:
    """(the tokenizer key, the layout) of the objective's student, or why it cannot use the cache."""
    layout = IdLayout.of(objective.student)
    if isinstance(layout, str):
        return layout
    key = tokenizer_key(objective.student, objective.prompt)
    return (key, layout) if key is not None else "its tokenizer is not a fast tokenizer"


def train_tokens(
    train: IndexedCorpus, planned_pairs: int, objective: Objective, mode: str, root: Path
) -> TrainTokens | None:
    """The run's token tables (opened, and built as ``mode`` says), or None: batches are tokenized."""
    if mode == "off":
        return None
    keyed = _keyed_layout(objective)
    if isinstance(keyed, str):
        logger.info("token cache: not used (%s); batches are tokenized", keyed)
        return None
    key, layout = keyed
    parts = _parts(train, root, key)
    found = [open_table(p.folder, p.label) for p in parts]
    missing = sum(p.texts_to_build() for p, t in zip(parts, found, strict=True) if t is None)
    if missing and mode == "auto" and missing > 2 * planned_pairs:
        logger.info(
            "token cache: not built (it would tokenize %d texts, the run tokenizes %d step by step; "
            "--token-cache on builds it for this and later runs); batches are tokenized",
            missing,
            2 * planned_pairs,
        )
        return None
    tokens = _opened(parts, found, objective, key, layout)
    if tokens is None:
        return None
    problem = _difference(tokens, parts, objective)
    if problem is not None:
        logger.warning(
            "token cache: not used (the cached ids do not rebuild the tokenizer's features: %s)", problem
        )
        return None
    logger.info("token cache: %s", ", ".join(str(t.folder) for t in tokens.tables))
    return tokens


def _opened(
    parts: list[_Part], found: list[TokenTable | None], objective: Objective, key: str, layout: IdLayout
) -> TrainTokens | None:
    """Every part's table, the missing ones built now (None, said in one line, if one cannot be written)."""
    student, prompt = objective.student, objective.prompt
    length = int(student.max_seq_length)

    def encode(texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        return encode_ids(student.tokenizer, [prompt + t for t in texts] if prompt else list(texts), length)

    tables = []
    for part, table in zip(parts, found, strict=True):
        if table is None:
            try:
                table = cached_table(
                    part.folder, lambda tmp, part=part: part.write(tmp, encode, key), part.label
                )
            except ResourceError as exc:
                logger.warning("token cache: not used (%s); batches are tokenized", exc)
                return None
        tables.append(table)
    starts = np.array([p.start for p in parts], dtype=np.int64)
    return TrainTokens(starts, tables, [p.rows for p in parts], layout)


def _difference(tokens: TrainTokens, parts: list[_Part], objective: Objective) -> str | None:
    """What differs between the features rebuilt from sample rows' ids and the tokenizer's."""
    prompt = objective.prompt
    for part in parts:
        local = part.sample()
        pairs = part.pairs_at(local)
        src, tgt = tokens.ids(local + part.start)
        texts = [prompt + t for t in [p.src for p in pairs] + [p.tgt for p in pairs]]
        problem = tokens.layout.difference(objective.student, texts, src + tgt)
        if problem is not None:
            return f"{part.folder}: {problem}"
    return None
