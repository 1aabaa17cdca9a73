"""The data side of a training run: training and dev pairs, and facts about them for the summary."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
from sentence_transformers import SentenceTransformer

from babelspace.data.apportionment import stratified_sample
from babelspace.data.arrow_corpus import CorpusRows, ReadOptions, open_corpus
from babelspace.data.dataset_rows import CorpusColumns
from babelspace.data.indexed_pairs import IndexedCorpus, PairParts
from babelspace.data.mined import is_mined_file
from babelspace.data.mix import parse_data_mix
from babelspace.data.pairs import ParallelCorpus, ParallelPair, ReadReport, one_pair_per_text
from babelspace.data.readers import load_parallel, subsample
from babelspace.data.sources import is_source
from babelspace.errors import BabelspaceError, TrainingError
from babelspace.resources import cache_dir
from babelspace.training.config import TrainConfig

logger = logging.getLogger(__name__)

# The language of the side every training pair feeds the teacher (its source side).
TEACHER_LANG = "en"
# The smallest dev set that still says something about retrieval.
MIN_DEV_PAIRS = 10
# Texts tokenised per call when counting truncated sentences (bounds the tokenizer's memory).
TOKENIZE_CHUNK = 4096
# Distinct sentences tokenised at most to count truncation (a longer run is counted on its first ones).
TRUNCATION_COUNT_LIMIT = 200_000


def _check_dev_size(spec: str, n: int, n_dev: int, cfg: TrainConfig) -> None:
    """A corpus of ``n`` pairs must give at least ``MIN_DEV_PAIRS`` dev pairs (the dev share is capped
    at 10% of the corpus; ``--dev-pairs 0``: none) and still fill one step's batch."""
    if cfg.dev_pairs and n_dev < MIN_DEV_PAIRS:
        if cfg.dev_pairs < MIN_DEV_PAIRS:
            why = f"--dev-pairs {cfg.dev_pairs} is below the minimum dev set of {MIN_DEV_PAIRS} pairs"
        else:
            why = (
                f"the dev set is capped at 10% of the corpus ({n // 10} pairs), below the minimum "
                f"of {MIN_DEV_PAIRS}; give at least {10 * MIN_DEV_PAIRS} pairs, or train without a dev set "
                "(--dev-pairs 0 --model-from final)"
            )
        raise TrainingError(f"corpus {spec!r} has {n} pairs: {why}")
    if n - n_dev < cfg.pairs_per_step:
        raise TrainingError(
            f"corpus {spec!r} has {n} pairs: after holding out {n_dev} dev pairs, "
            f"{n - n_dev} remain, fewer than a batch of {cfg.pairs_per_step}; give more data or a "
            "smaller --batch-size"
        )


def _split_dev(corpus: ParallelCorpus, spec: str, cfg: TrainConfig) -> tuple[list, list]:
    """(train, dev) pairs of a non-Bible corpus: ``dev_pairs`` held out, at most 10% of the corpus
    and at least ``MIN_DEV_PAIRS`` (seeded, stratified by language pair); pairs equal to a dev pair
    are never trained on."""
    n_dev = min(cfg.dev_pairs, len(corpus) // 10)
    _check_dev_size(spec, len(corpus), n_dev, cfg)
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
    """``--data`` values as (corpus, sampling weight): ``bible:1 cldr:0.5`` or ``bible:1,cldr:0.5``,
    two line-aligned files as ``aligned:SRC_FILE+TGT_FILE[:WEIGHT]`` (the one parser:
    :func:`babelspace.data.mix.parse_data_items`)."""
    try:
        return parse_data_mix(data)
    except BabelspaceError as exc:
        raise TrainingError(f"--data: {exc}") from None


def mix_names(data: Sequence[str]) -> list[str]:
    """The corpus names of ``--data`` without their weights (``bible:1 cldr:0.5`` -> bible, cldr)."""
    return [name for name, _ in data_mix(data)]


def load_corpora(cfg: TrainConfig) -> tuple[IndexedCorpus, ParallelCorpus]:
    """Training and dev pairs. The Bible has its own dev books; other corpora give up ``dev_pairs``
    pairs (seeded, stratified by language pair) that are then never trained on. Files, dataset
    folders and Hub datasets are read through the memory-mapped Arrow cache
    (`babelspace.data.arrow_corpus`); the training set is one `IndexedCorpus` of them all."""
    train_parts: list[tuple[str, Sequence[ParallelPair]]] = []
    dev_parts: list[ParallelPair] = []
    reports = []
    for spec, _weight in data_mix(cfg.data):
        if spec == "bible" or is_source(spec) or _is_mined(spec):
            train, dev, report = _in_memory_part(spec, cfg)
        else:
            train, dev, report = _arrow_part(spec, cfg)
        reports.append(report)
        train_parts.append((spec, train))
        dev_parts += dev
    if not dev_parts and cfg.dev_pairs:
        raise TrainingError(
            "no dev pairs: --data needs at least one parallel (two-language) corpus, or --dev-pairs 0 "
            "--model-from final to train without a dev set"
        )
    train = _train_corpus(train_parts, _merged(reports), cfg)
    order = np.random.default_rng(cfg.seed).permutation(len(dev_parts))
    dev = ParallelCorpus("dev", one_pair_per_text(dev_parts[i] for i in order), train.report)
    if len(dev) > cfg.dev_pairs:
        dev = subsample(dev, cfg.dev_pairs, seed=cfg.seed)
    return train, dev


def _is_mined(spec: str) -> bool:
    """``babelspace mine`` output (``score<TAB>src<TAB>tgt[...]``): read in memory, with ``--min-score``."""
    path = Path(spec)
    return path.is_file() and is_mined_file(path)


def _in_memory_part(spec: str, cfg: TrainConfig) -> tuple[list[ParallelPair], list[ParallelPair], ReadReport]:
    """(train, dev, report) of the Bible, a built-in source or mined pairs, read into memory."""
    corpus = load_parallel(
        spec,
        langs=cfg.langs,
        split="train",
        skip_bad_lines=cfg.skip_bad_lines,
        src_lang=cfg.src_lang,
        tgt_lang=cfg.tgt_lang,
        min_score=cfg.min_score,
    )
    if len(corpus) == 0:
        raise TrainingError(f"corpus {spec!r} has no usable pairs ({corpus.report.summary()})")
    if _is_mined(spec):
        corpus = _teacher_side_first(corpus, spec)
    if spec == "bible":
        return corpus.pairs, load_parallel("bible", langs=cfg.langs, split="dev").pairs, corpus.report
    if all(p.src_lang == p.tgt_lang for p in corpus.pairs):
        # monolingual (s, s) pairs: nothing to retrieve across languages, so no dev share
        return corpus.pairs, [], corpus.report
    train, dev = _split_dev(corpus, spec, cfg)
    return train, dev, corpus.report


def _teacher_side_first(corpus: ParallelCorpus, spec: str) -> ParallelCorpus:
    """Mined pairs with the teacher's language (`TEACHER_LANG`) as the source side, the side the
    teacher reads: ``mine --src-lang de --tgt-lang en`` output has its sides swapped (said in one
    line); pairs with no side in that language are trained as they are, with a warning."""
    langs = sorted(corpus.lang_pairs())
    if all(sl == TEACHER_LANG for sl, _ in langs):
        return corpus
    named = ", ".join(f"{sl}→{tl}" for sl, tl in langs)
    if all(tl == TEACHER_LANG for _, tl in langs):
        logger.info(
            "%s: mined %s (its summary's languages): sides swapped, so the teacher reads the %s side",
            spec,
            named,
            TEACHER_LANG,
        )
        pairs = [ParallelPair(p.tgt, p.src, p.tgt_lang, p.src_lang, p.origin) for p in corpus.pairs]
        return ParallelCorpus(corpus.name, pairs, corpus.report)
    logger.warning(
        "%s: mined %s pairs have no %s side: the teacher reads their source side as it is",
        spec,
        named,
        TEACHER_LANG,
    )
    return corpus


def read_options(cfg: TrainConfig) -> ReadOptions:
    """How ``--data`` files, folders and Hub datasets are read (part of their cache key)."""
    columns = CorpusColumns(cfg.src_col, cfg.tgt_col, cfg.src_lang_col, cfg.tgt_lang_col)
    return ReadOptions(cfg.src_lang, cfg.tgt_lang, cfg.skip_bad_lines, columns, cfg.split)


def _arrow_part(spec: str, cfg: TrainConfig) -> tuple[PairParts, list[ParallelPair], ReadReport]:
    """(train, dev, report) of a converted corpus, by index: only the dev pairs become objects."""
    corpus = open_corpus(spec, read_options(cfg), Path(cfg.cache_dir or cache_dir()))
    report = corpus.report.copy()
    part = PairParts([(spec, CorpusRows(corpus))])
    if cfg.langs is not None:
        wanted = set(cfg.langs)
        names, codes = part.lang_pairs()
        keep = np.array([{s, t} - {"en"} <= wanted for s, t in names], dtype=bool)[codes]
        if not keep.all():
            report.skipped["language not requested"] = int((~keep).sum())
            part = part.subset(np.flatnonzero(keep))
    report.kept = len(part)
    if len(part) == 0:
        raise TrainingError(f"corpus {spec!r} has no usable pairs ({report.summary()})")
    names, codes = part.lang_pairs()
    if all(s == t for s, t in names):
        return part, [], report
    n_dev = min(cfg.dev_pairs, len(part) // 10)
    _check_dev_size(spec, len(part), n_dev, cfg)
    dev_idx = stratified_sample(codes, len(names), n_dev, cfg.seed)
    keys = part.pair_keys()
    train = part.subset(np.flatnonzero(~np.isin(keys, keys[dev_idx])))
    if len(train) < cfg.pairs_per_step:
        raise TrainingError(
            f"corpus {spec!r}: after holding out the dev pairs (and their repeats), {len(train)} pairs "
            f"remain, fewer than a batch of {cfg.batch_size}"
        )
    return train, part.take(dev_idx), report


def _train_corpus(
    parts: list[tuple[str, Sequence[ParallelPair]]], report: ReadReport, cfg: TrainConfig
) -> IndexedCorpus:
    """The training set, one `IndexedCorpus` whatever its parts (in-memory lists or memory-mapped
    rows); capped at ``--max-pairs`` (stratified by language pair)."""
    pairs = PairParts(parts)
    if cfg.max_pairs is not None and len(pairs) > cfg.max_pairs:
        names, codes = pairs.lang_pairs()
        report = report.copy()
        report.skipped["over max_pairs"] = (
            report.skipped.get("over max_pairs", 0) + len(pairs) - cfg.max_pairs
        )
        pairs = pairs.subset(stratified_sample(codes, len(names), cfg.max_pairs, cfg.seed))
        report.kept = len(pairs)
    return IndexedCorpus("train", pairs, report)


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


def drop_identical(train: IndexedCorpus, drop: bool) -> tuple[IndexedCorpus, int]:
    """Warn about (and with ``drop`` remove) translation pairs whose source equals the target
    (monolingual pairs are meant that way)."""
    mask = train.pairs.identical()
    identical = int(mask.sum())
    if identical:
        logger.warning(
            "%d training pairs have identical source and target%s",
            identical,
            " (dropped)" if drop else " (kept; --drop-identical drops them)",
        )
        if drop:
            train = IndexedCorpus(train.name, train.pairs.subset(np.flatnonzero(~mask)), train.report)
    return train, identical


def count_truncated(
    student: SentenceTransformer,
    pairs: Iterable[ParallelPair],
    max_seq_length: int,
    limit: int = TRUNCATION_COUNT_LIMIT,
) -> tuple[int, int | None]:
    """How many of the distinct sentences the run trains on exceed ``max_seq_length`` tokens (they
    are truncated; the count goes into the run summary). ``pairs`` is streamed; a run with more than
    ``limit`` distinct sentences is counted on the first ``limit`` (in the order of ``pairs``): the
    second value is then ``limit``, else None."""
    distinct: set[str] = set()
    counted: int | None = None
    for p in pairs:
        distinct.update((p.src, p.tgt))
        if len(distinct) >= limit:
            counted = limit
            break
    texts = sorted(distinct)[:limit]
    truncated = 0
    for i in range(0, len(texts), TOKENIZE_CHUNK):
        chunk = texts[i : i + TOKENIZE_CHUNK]
        enc = student.tokenizer(chunk, add_special_tokens=True, truncation=False)["input_ids"]
        truncated += sum(len(ids) > max_seq_length for ids in enc)
    if truncated:
        logger.warning(
            "%d training sentences%s exceed --max-seq-length %d and are truncated",
            truncated,
            f" of the first {counted} the run trains on" if counted else "",
            max_seq_length,
        )
    return truncated, counted
