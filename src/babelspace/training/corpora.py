"""The data side of a training run: training and dev pairs, and facts about them for the summary."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence

import numpy as np
from sentence_transformers import SentenceTransformer

from babelspace.data.pairs import ParallelCorpus, ParallelPair
from babelspace.data.readers import load_parallel, subsample
from babelspace.errors import TrainingError
from babelspace.training.config import TrainConfig

logger = logging.getLogger(__name__)

# The smallest dev set that still says something about retrieval.
MIN_DEV_PAIRS = 10
# Texts tokenised per call when counting truncated sentences (bounds the tokenizer's memory).
TOKENIZE_CHUNK = 4096


def one_pair_per_text(pairs: Iterable[ParallelPair]) -> list[ParallelPair]:
    """Keep a pair only if neither its source nor its target appeared in an earlier kept pair.

    Retrieval is scored by index: a verse shared by several languages would make its other copies
    count as errors, so evaluation sets keep each text once."""
    seen: set[str] = set()
    kept = []
    for p in pairs:
        if p.src not in seen and p.tgt not in seen:
            seen.update((p.src, p.tgt))
            kept.append(p)
    return kept


def _split_dev(corpus: ParallelCorpus, spec: str, cfg: TrainConfig) -> tuple[list, list]:
    """(train, dev) pairs of a non-Bible corpus: ``dev_pairs`` held out (seeded, stratified by
    language pair); pairs equal to a dev pair are never trained on."""
    n_dev = min(cfg.dev_pairs, len(corpus) // 10)
    if n_dev < MIN_DEV_PAIRS or len(corpus) - n_dev < cfg.batch_size:
        raise TrainingError(
            f"corpus {spec!r} has {len(corpus)} pairs: too few to hold out a dev set of at least "
            f"{MIN_DEV_PAIRS} pairs and still fill a batch of {cfg.batch_size}; give more data or a smaller "
            "--batch-size"
        )
    dev = subsample(corpus, n_dev, seed=cfg.seed)
    dev_set = {(p.src, p.tgt) for p in dev.pairs}
    train = [p for p in corpus.pairs if (p.src, p.tgt) not in dev_set]
    if len(train) < cfg.batch_size:
        distinct = len({(p.src, p.tgt) for p in corpus.pairs})
        raise TrainingError(
            f"corpus {spec!r} has {len(corpus)} pairs but only {distinct} distinct ones: after holding out "
            f"the dev pairs, {len(train)} remain, fewer than a batch of {cfg.batch_size}"
        )
    return train, dev.pairs


def load_corpora(cfg: TrainConfig) -> tuple[ParallelCorpus, ParallelCorpus]:
    """Training and dev pairs. The Bible has its own dev books; other corpora give up ``dev_pairs``
    pairs (seeded, stratified by language pair) that are then never trained on."""
    train_parts: list[ParallelPair] = []
    dev_parts: list[ParallelPair] = []
    reports = []
    for spec in cfg.data:
        corpus = load_parallel(
            spec,
            langs=cfg.langs,
            split="train",
            skip_bad_lines=cfg.skip_bad_lines,
            src_lang=cfg.src_lang,
            tgt_lang=cfg.tgt_lang,
        )
        reports.append(corpus.report)
        if len(corpus) == 0:
            raise TrainingError(f"corpus {spec!r} has no usable pairs ({corpus.report.summary()})")
        if spec == "bible":
            train_parts += corpus.pairs
            dev_parts += load_parallel("bible", langs=cfg.langs, split="dev").pairs
        else:
            train, dev = _split_dev(corpus, spec, cfg)
            train_parts += train
            dev_parts += dev
    train = ParallelCorpus("train", train_parts, reports[0])
    if cfg.max_pairs is not None and len(train) > cfg.max_pairs:
        train = subsample(train, cfg.max_pairs, seed=cfg.seed)
    order = np.random.default_rng(cfg.seed).permutation(len(dev_parts))
    dev = ParallelCorpus("dev", one_pair_per_text(dev_parts[i] for i in order), reports[0])
    if len(dev) > cfg.dev_pairs:
        dev = subsample(dev, cfg.dev_pairs, seed=cfg.seed)
    return train, dev


def drop_identical(train: ParallelCorpus, drop: bool) -> tuple[ParallelCorpus, int]:
    """Warn about (and with ``drop`` remove) pairs whose source equals the target."""
    identical = sum(p.src == p.tgt for p in train.pairs)
    if identical:
        logger.warning(
            "%d training pairs have identical source and target%s",
            identical,
            " (dropped)" if drop else " (kept; --drop-identical drops them)",
        )
        if drop:
            train = ParallelCorpus(train.name, [p for p in train.pairs if p.src != p.tgt], train.report)
    return train, identical


def count_truncated(student: SentenceTransformer, pairs: Sequence[ParallelPair], max_seq_length: int) -> int:
    """How many of the sentences the run trains on exceed ``max_seq_length`` tokens (they are
    truncated; the count goes into the run summary)."""
    texts = sorted({p.src for p in pairs} | {p.tgt for p in pairs})
    truncated = 0
    for i in range(0, len(texts), TOKENIZE_CHUNK):
        chunk = texts[i : i + TOKENIZE_CHUNK]
        enc = student.tokenizer(chunk, add_special_tokens=True, truncation=False)["input_ids"]
        truncated += sum(len(ids) > max_seq_length for ids in enc)
    if truncated:
        logger.warning(
            "%d training sentences exceed --max-seq-length %d and are truncated", truncated, max_seq_length
        )
    return truncated
