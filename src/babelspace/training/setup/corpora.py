"""The data side of a training run: training and dev pairs, and facts about them for the summary."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from sentence_transformers import SentenceTransformer

from babelspace.data.mix import parse_data_mix
from babelspace.data.pairs import ParallelCorpus, ParallelPair, ReadReport, one_pair_per_text
from babelspace.data.readers import load_parallel, subsample
from babelspace.errors import BabelspaceError, TrainingError
from babelspace.training.config import TrainConfig

logger = logging.getLogger(__name__)

# The smallest dev set that still says something about retrieval.
MIN_DEV_PAIRS = 10
# Texts tokenised per call when counting truncated sentences (bounds the tokenizer's memory).
TOKENIZE_CHUNK = 4096


def _split_dev(corpus: ParallelCorpus, spec: str, cfg: TrainConfig) -> tuple[list, list]:
    """(train, dev) pairs of a non-Bible corpus: ``dev_pairs`` held out, at most 10% of the corpus
    and at least ``MIN_DEV_PAIRS`` (seeded, stratified by language pair); pairs equal to a dev pair
    are never trained on."""
    n_dev = min(cfg.dev_pairs, len(corpus) // 10)
    if n_dev < MIN_DEV_PAIRS:
        if cfg.dev_pairs < MIN_DEV_PAIRS:
            why = f"--dev-pairs {cfg.dev_pairs} is below the minimum dev set of {MIN_DEV_PAIRS} pairs"
        else:
            why = (
                f"the dev set is capped at 10% of the corpus ({len(corpus) // 10} pairs), below the minimum "
                f"of {MIN_DEV_PAIRS}; give at least {10 * MIN_DEV_PAIRS} pairs"
            )
        raise TrainingError(f"corpus {spec!r} has {len(corpus)} pairs: {why}")
    if len(corpus) - n_dev < cfg.pairs_per_step:
        raise TrainingError(
            f"corpus {spec!r} has {len(corpus)} pairs: after holding out {n_dev} dev pairs, "
            f"{len(corpus) - n_dev} remain, fewer than a batch of {cfg.pairs_per_step}; give more data or a "
            "smaller --batch-size"
        )
    dev = subsample(corpus, n_dev, seed=cfg.seed)
    dev_set = {(p.src, p.tgt) for p in dev.pairs}
    train = [p for p in corpus.pairs if (p.src, p.tgt) not in dev_set]
    if len(train) < cfg.pairs_per_step:
        distinct = len({(p.src, p.tgt) for p in corpus.pairs})
        raise TrainingError(
            f"corpus {spec!r} has {len(corpus)} pairs but only {distinct} distinct ones: after holding out "
            f"the dev pairs, {len(train)} remain, fewer than a batch of {cfg.pairs_per_step}"
        )
    return train, dev.pairs


def data_mix(data: Sequence[str]) -> list[tuple[str, float]]:
    """``--data`` values as (corpus, sampling weight): ``bible:1 cldr:0.5`` or ``bible:1,cldr:0.5``
    (see :func:`babelspace.data.mix.parse_data_mix`); two aligned files ``SRC,TGT`` are one
    corpus of weight 1."""
    mix: list[tuple[str, float]] = []
    for item in data:
        files = item.split(",")
        if len(files) == 2 and all(Path(f).is_file() for f in files):
            mix.append((item, 1.0))
        else:
            try:
                mix.extend(parse_data_mix(item))
            except BabelspaceError as exc:
                raise TrainingError(f"--data: {exc}") from None
    names = [name for name, _ in mix]
    if len(set(names)) != len(names):
        raise TrainingError(f"--data lists a corpus twice: {' '.join(data)}")
    return mix


def mix_names(data: Sequence[str]) -> list[str]:
    """The corpus names of ``--data`` without their weights (``bible:1 cldr:0.5`` -> bible, cldr)."""
    return [name for name, _ in data_mix(data)]


def load_corpora(cfg: TrainConfig) -> tuple[ParallelCorpus, ParallelCorpus]:
    """Training and dev pairs. The Bible has its own dev books; other corpora give up ``dev_pairs``
    pairs (seeded, stratified by language pair) that are then never trained on."""
    train_parts: list[ParallelPair] = []
    dev_parts: list[ParallelPair] = []
    reports = []
    for spec, _weight in data_mix(cfg.data):
        corpus = load_parallel(
            spec,
            langs=cfg.langs,
            split="train",
            skip_bad_lines=cfg.skip_bad_lines,
            src_lang=cfg.src_lang,
            tgt_lang=cfg.tgt_lang,
            min_score=cfg.min_score,
        )
        reports.append(corpus.report)
        if len(corpus) == 0:
            raise TrainingError(f"corpus {spec!r} has no usable pairs ({corpus.report.summary()})")
        if spec == "bible":
            train_parts += corpus.pairs
            dev_parts += load_parallel("bible", langs=cfg.langs, split="dev").pairs
        elif all(p.src_lang == p.tgt_lang for p in corpus.pairs):
            # monolingual (s, s) pairs: nothing to retrieve across languages, so no dev share
            train_parts += corpus.pairs
        else:
            train, dev = _split_dev(corpus, spec, cfg)
            train_parts += train
            dev_parts += dev
    if not dev_parts:
        raise TrainingError("no dev pairs: --data needs at least one parallel (two-language) corpus")
    train = ParallelCorpus("train", train_parts, _merged(reports))
    if cfg.max_pairs is not None and len(train) > cfg.max_pairs:
        train = subsample(train, cfg.max_pairs, seed=cfg.seed)
    order = np.random.default_rng(cfg.seed).permutation(len(dev_parts))
    dev = ParallelCorpus("dev", one_pair_per_text(dev_parts[i] for i in order), train.report)
    if len(dev) > cfg.dev_pairs:
        dev = subsample(dev, cfg.dev_pairs, seed=cfg.seed)
    return train, dev


def _identical(p: ParallelPair) -> bool:
    """A translation pair whose target copies its source (monolingual pairs are meant that way)."""
    return p.src == p.tgt and p.src_lang != p.tgt_lang


def _merged(reports: list[ReadReport]) -> ReadReport:
    """One report for several corpora: every corpus's counts and skips."""
    if len(reports) == 1:
        return reports[0]
    skipped: dict[str, int] = {}
    for r in reports:
        for reason, n in r.skipped.items():
            skipped[reason] = skipped.get(reason, 0) + n
    return ReadReport(
        " + ".join(r.source for r in reports),
        read=sum(r.read for r in reports),
        kept=sum(r.kept for r in reports),
        skipped=skipped,
    )


def drop_identical(train: ParallelCorpus, drop: bool) -> tuple[ParallelCorpus, int]:
    """Warn about (and with ``drop`` remove) translation pairs whose source equals the target."""
    identical = sum(map(_identical, train.pairs))
    if identical:
        logger.warning(
            "%d training pairs have identical source and target%s",
            identical,
            " (dropped)" if drop else " (kept; --drop-identical drops them)",
        )
        if drop:
            train = ParallelCorpus(train.name, [p for p in train.pairs if not _identical(p)], train.report)
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
