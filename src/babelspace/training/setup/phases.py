"""The phases of a training run before the first step, each a function of its own:

prepare the data (pairs, dev set, planned batches) -> teacher targets (cached teacher vectors, the
mean shift, the contrastive bank) -> closed-form projection fit -> optimizer and schedule.
The loop that follows is :mod:`babelspace.training.trainer`.
"""

from __future__ import annotations

import itertools
import logging
import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
import xxhash
from sentence_transformers import SentenceTransformer

from babelspace.data.apportionment import (
    group_members,
    group_weight_array,
    stratified_sample,
    weighted_sample_indices,
)
from babelspace.data.indexed_pairs import IndexedCorpus
from babelspace.data.mix import group_weights
from babelspace.data.pairs import ParallelCorpus, ParallelPair
from babelspace.data.sampling import BalancedBatchSampler
from babelspace.errors import TrainingError
from babelspace.models.encoder import projection_inputs, projection_layer
from babelspace.models.output_map import teacher_radius
from babelspace.models.projection_fit import fit_projection
from babelspace.progress import Progress
from babelspace.resources import cache_dir
from babelspace.training.collective import check_batch_per_process
from babelspace.training.config import TrainConfig
from babelspace.training.setup.corpora import count_truncated, data_mix, drop_identical, load_corpora
from babelspace.training.setup.english_fit import english_fit_texts
from babelspace.training.setup.teacher_cache import TeacherCache, chunked, encode_shared

logger = logging.getLogger(__name__)

# Offsets of the seed for the draws that must not share a random stream with the sampler.
FIT_SAMPLE_SEED, BANK_SEED = 1, 2
# Sources read at a time when the contrastive bank is drawn from a run's stream of sources.
BANK_CHUNK = 65_536
# Pairs built at a time when a plan that covers the corpus is read in corpus order.
PLAN_CHUNK = 65_536
# Steps from which streaming a plan step by step shows progress (about 60 µs per step).
PLAN_PROGRESS_STEPS = 50_000
# Pairs from which reading a whole corpus shows progress.
PLAN_PROGRESS_PAIRS = 1_000_000


@dataclass
class DataPlan:
    """Pairs, dev set and the batch of every step, computed on demand by the sampler from the seed
    and the step (a pure function of the data and the seed, so a resumed run gets exactly the
    batches the uninterrupted run used; nothing per step is held)."""

    train: IndexedCorpus
    dev: ParallelCorpus
    sampler: BalancedBatchSampler
    total_steps: int
    fingerprint: str
    counts: dict[str, int] = field(default_factory=dict)

    def batch(self, step: int) -> list[int]:
        """Indices (into ``train.pairs``) of the global batch of ``step``."""
        return self.sampler.batch(step)

    def pairs(self, indices: Sequence[int]) -> list[ParallelPair]:
        """The training pairs at ``indices`` (built on demand from memory-mapped parts)."""
        return self.train.pairs.take(indices)

    def planned_pairs(self) -> Iterator[ParallelPair]:
        """Every step's pairs, in step order, built step by step (never held at once; a plan of
        at least ``PLAN_PROGRESS_STEPS`` steps shows progress)."""
        if self.total_steps < PLAN_PROGRESS_STEPS:
            for step in range(self.total_steps):
                yield from self.pairs(self.batch(step))
            return
        with Progress(total=self.total_steps, desc="reading the plan", unit="step") as bar:
            for step in range(self.total_steps):
                yield from self.pairs(self.batch(step))
                bar.update(1)

    def distinct_pairs(self) -> Iterator[ParallelPair]:
        """Every pair the run trains on, at least once: when the plan cycles through the whole
        corpus (:meth:`~babelspace.data.sampling.BalancedBatchSampler.covers_all`), the corpus in
        its own order, each pair once, so the cost follows the corpus and not the step count; else
        every step's pairs in step order."""
        if not self.sampler.covers_all(self.total_steps):
            yield from self.planned_pairs()
            return
        n = len(self.train.pairs)
        chunks = (np.arange(start, min(n, start + PLAN_CHUNK)) for start in range(0, n, PLAN_CHUNK))
        if n < PLAN_PROGRESS_PAIRS:
            for chunk in chunks:
                yield from self.pairs(chunk)
            return
        with Progress(total=n, desc="reading the corpus", unit="pair") as bar:
            for chunk in chunks:
                yield from self.pairs(chunk)
                bar.update(len(chunk))

    def sources(self) -> Iterator[str]:
        """The English side of every pair the run trains on (:meth:`distinct_pairs`, streamed)."""
        return (p.src for p in self.distinct_pairs())


@dataclass
class TeacherTargets:
    """What the distillation objective needs from the teacher, computed once before training."""

    cache: TeacherCache | None = None
    dev_vectors: np.ndarray | None = None
    shift: np.ndarray | None = None
    bank: np.ndarray | None = None
    # RMS norm of the centred teacher targets of the fit sample (--export-norm teacher), or None
    radius: float | None = None
    fit_sample: list[ParallelPair] = field(default_factory=list)
    # English-only sentences of the closed-form fit (--projection-fit-english), first term only
    fit_english: list[str] = field(default_factory=list)


def total_steps(cfg: TrainConfig, batches_per_epoch: int) -> int:
    if cfg.max_steps is not None:
        return int(cfg.max_steps)
    assert cfg.epochs is not None  # TrainConfig refuses neither
    return max(1, math.ceil(cfg.epochs * batches_per_epoch))


def prepare_data(cfg: TrainConfig, student: SentenceTransformer, world: int = 1) -> DataPlan:
    train, dev = load_corpora(cfg)
    train, identical = drop_identical(train, cfg.drop_identical)
    logger.info(
        "train: %d pairs in %d language pairs; dev: %d pairs", len(train), len(train.lang_pairs()), len(dev)
    )
    if cfg.gather_negatives and cfg.batch_size % world:
        raise TrainingError(
            f"--gather-negatives needs --batch-size ({cfg.batch_size}) divisible by the {world} processes"
        )
    check_batch_per_process(cfg.batch_size, world)
    # One batch per optimizer step (batch_size x grad_accum pairs), cut into grad_accum forward
    # passes by the input pipeline (training/batches.py). "random": plain shuffled batches over the
    # whole corpus, never length-bucketed (official MEXMA).
    distinct = needs_distinct_texts(cfg)
    weights = _source_weights(cfg, train)
    sampler = BalancedBatchSampler(
        train.pairs.arrays(by_source=weights is not None, texts=distinct),
        cfg.pairs_per_step,
        mode=cfg.sampling,
        bucket_by_length=cfg.bucket_by_length,
        seed=cfg.seed,
        infinite=True,
        distinct_texts=distinct,
        group_weights=weights,
    )
    n_steps = total_steps(cfg, len(sampler))
    plan = DataPlan(train, dev, sampler, n_steps, train.fingerprint())
    truncated, counted = count_truncated(student, plan.distinct_pairs(), cfg.train_seq_length)
    plan.counts = {"identical_pairs": identical, "truncated_sentences": truncated}
    if counted is not None:
        plan.counts["truncation_counted_texts"] = counted
    return plan


def needs_distinct_texts(cfg: TrainConfig) -> bool:
    """Objectives that compare the rows of a batch with each other (in-batch negatives, KoLeo,
    the bottleneck's KoLeo/alignment) must never see one text twice in a batch: the copy would be a
    false negative, or a zero nearest-neighbour distance for KoLeo. Distillation compares each row
    with its own teacher vector only (its contrastive bank masks the row's own sentence)."""
    return any(name != "distill" for name in cfg.objective_names)


def _source_weights(cfg: TrainConfig, train: IndexedCorpus) -> dict | None:
    """Sampler group weights per (source, language pair) from the ``--data`` weights, when several
    sources are mixed; None: one source keeps the plain per-language-pair balance."""
    mix = data_mix(cfg.data)
    if len(mix) < 2 or cfg.sampling != "balanced":
        return None
    names, _ = train.pairs.groups(by_source=True)
    return group_weights(names, dict(mix))


def fit_sample(train: IndexedCorpus, cfg: TrainConfig) -> list[ParallelPair]:
    """Pairs for the closed-form fit and the teacher mean: stratified by language pair for one
    corpus; for a ``--data`` mix, in the batches' shares per (source, language pair), so that the
    fit sees the mix's English-only and short parallel text and not only the largest source."""
    n = min(cfg.projection_fit_pairs, len(train))
    weights = _source_weights(cfg, train)
    seed = cfg.seed + FIT_SAMPLE_SEED
    names, codes = train.pairs.groups(by_source=weights is not None)
    if weights is None:
        return train.pairs.take(stratified_sample(codes, len(names), n, seed))
    chosen = weighted_sample_indices(
        group_members(codes, len(names)), group_weight_array(names, weights), n, seed
    )
    return train.pairs.take(chosen)


def teacher_targets(
    cfg: TrainConfig, teacher: SentenceTransformer, plan: DataPlan, accelerator
) -> TeacherTargets:
    """Teacher vectors once, before training, for every source the run will see (+ dev, fit
    sample), streamed. Under torchrun every rank encodes its share of what is missing
    (:func:`~babelspace.training.setup.teacher_cache.encode_shared`), then reads the others' shards."""
    needs_sample = cfg.projection_init == "lstsq" or cfg.center_teacher or cfg.teacher_contrast > 0
    sample = fit_sample(plan.train, cfg) if needs_sample else []
    fit_english = []
    if cfg.projection_init == "lstsq" and cfg.projection_fit_english:
        seed = cfg.seed + FIT_SAMPLE_SEED
        exclude = [p.src for p in sample]
        fit_english = english_fit_texts(plan.train, cfg.projection_fit_english, seed, exclude)
    cache = TeacherCache(teacher, cfg.teacher, Path(cfg.cache_dir or cache_dir()))

    def needed() -> Iterator[str]:
        yield from plan.sources()
        yield from (p.src for p in plan.dev.pairs)
        yield from (p.src for p in sample)
        yield from fit_english

    encode_shared(
        cache, needed, accelerator.process_index, accelerator.num_processes, accelerator.wait_for_everyone
    )
    targets = TeacherTargets(cache=cache, fit_sample=sample, fit_english=fit_english)
    targets.dev_vectors = cache.lookup([p.src for p in plan.dev.pairs])
    if cfg.center_teacher:
        # Distil into the mean-centred teacher space: regression onto raw teacher vectors
        # reproduces their large common component, which makes a few teacher vectors hubs for
        # cosine retrieval (docs/distillation.md). The exported model adds the mean back.
        targets.shift = teacher_mean(cache, sample)
        if cfg.export_norm == "teacher" and cfg.export_space == "teacher":
            # the cache holds L2-normalised teacher vectors (whatever the teacher's last module)
            targets.radius = teacher_radius(cache.lookup([p.src for p in sample]), targets.shift)
            logger.info("export: centred part of every vector scaled to the teacher's %.4f", targets.radius)
    if cfg.teacher_contrast > 0:
        targets.bank = contrast_bank(cache, sample, plan.sources(), targets.shift, cfg)
    return targets


def teacher_mean(cache: TeacherCache, fit_sample: Sequence[ParallelPair]) -> np.ndarray:
    """The teacher's mean vector over the fit sample, one term per pair: for a ``--data`` mix the
    sample is drawn in the batches' shares (:func:`fit_sample`), so the mean is the mix's (an
    English name paired with 21 languages counts 21 times, as in the batches), not the mean of the
    largest source."""
    texts = [p.src for p in fit_sample]
    distinct = sorted(set(texts))
    index = {t: i for i, t in enumerate(distinct)}
    counts = np.bincount([index[t] for t in texts], minlength=len(distinct)).astype(np.float64)
    return (counts @ cache.lookup(distinct).astype(np.float64) / counts.sum()).astype(np.float32)


def contrast_bank(
    cache: TeacherCache,
    fit_sample: Sequence[ParallelPair],
    sources: Iterable[str],
    shift: np.ndarray | None,
    cfg: TrainConfig,
) -> np.ndarray:
    """Teacher vectors of up to ``cfg.teacher_negatives`` distinct training English sentences (the
    projection-fit sample and the sources the run will see: all already in the teacher cache, so
    the bank costs no encoding), shifted like the targets. Negatives for the contrastive term.

    ``sources`` is streamed: beyond ``teacher_negatives`` distinct texts the bank is the texts of
    the smallest seeded hashes (a uniform sample that needs memory for the bank only), sorted."""
    texts = _bottom_k([p.src for p in fit_sample], sources, cfg.teacher_negatives, cfg.seed + BANK_SEED)
    bank = cache.lookup(texts)
    logger.info(
        "teacher-space contrastive term: weight %g, bank of %d teacher vectors",
        cfg.teacher_contrast,
        len(texts),
    )
    return bank if shift is None else bank - shift


def _bottom_k(first: Sequence[str], rest: Iterable[str], k: int, seed: int) -> list[str]:
    """The ``k`` distinct texts of ``first`` and ``rest`` with the smallest seeded 64-bit hashes
    (all of them when there are at most ``k``), sorted; memory for about 2k texts."""
    kept: dict[str, int] = {}
    for chunk in itertools.chain([list(first)], chunked(rest, BANK_CHUNK)):
        for t in chunk:
            if t not in kept:
                kept[t] = xxhash.xxh3_64_intdigest(t.encode(), seed=seed)
        if len(kept) > 2 * k:
            kept = dict(sorted(kept.items(), key=lambda kv: kv[1])[:k])
    if len(kept) > k:
        kept = dict(sorted(kept.items(), key=lambda kv: kv[1])[:k])
    return sorted(kept)


def fit_student_projection(
    student: SentenceTransformer, targets: TeacherTargets, cfg: TrainConfig
) -> float | None:
    """Closed-form fit of the student's projection on the distillation loss (None: nothing to fit)."""
    if cfg.projection_init != "lstsq" or projection_layer(student) is None or targets.cache is None:
        return None
    sample = targets.fit_sample
    # what the projection reads (the pooled vector, or a non-linear Dense's output) of the untrained
    # student, cached on disk like the teacher's vectors: a later run of the same student reuses them
    features = TeacherCache(
        projection_inputs(student),
        cfg.teacher if cfg.student == "teacher" else cfg.student,
        Path(cfg.cache_dir or cache_dir()),
        normalize=False,
    )
    english = targets.fit_english
    features.ensure([p.src for p in sample] + [p.tgt for p in sample] + english)
    src = features.lookup([p.src for p in sample])
    tgt = features.lookup([p.tgt for p in sample])
    eng = features.lookup(english) if english else None
    loss = fit_projection(
        student,
        src,
        tgt,
        targets.cache.lookup([p.src for p in sample]),
        ridge=cfg.projection_ridge,
        teacher_shift=targets.shift,
        prior=cfg.projection_prior,
        english_features=eng,
        english_vectors=targets.cache.lookup(english) if english else None,
    )
    logger.info(
        "projection fitted in closed form on %d pairs and %d English sentences (train loss %.4f)",
        len(sample),
        len(english),
        loss,
    )
    return loss


def freeze(student: SentenceTransformer, cfg: TrainConfig) -> None:
    """Freeze the word embeddings (``cfg.frozen_embeddings``) and all but the top ``train_layers``;
    with ``cfg.gradient_checkpointing``, turn on the encoder's own activation checkpointing (what
    trains and what the backward keeps: decided before the objective and the batch-size probe)."""
    auto = getattr(student[0], "auto_model", None)
    if cfg.gradient_checkpointing:
        checkpoint_activations(auto)
    if auto is None:
        return
    if cfg.frozen_embeddings:
        for p in auto.get_input_embeddings().parameters():
            p.requires_grad = False
    if cfg.train_layers is not None:
        layers = getattr(getattr(auto, "encoder", None), "layer", None)
        if layers is None:
            raise TrainingError("--train-layers needs a BERT-like encoder with encoder.layer")
        n_frozen = len(layers) - cfg.train_layers
        for module in [auto.embeddings, *list(layers)[: max(0, n_frozen)]]:
            for p in module.parameters():
                p.requires_grad = False


def checkpoint_activations(encoder: object) -> None:
    """The student's transformers encoder recomputes its layers' activations in the backward
    instead of keeping them: non-reentrant (it needs no input that requires a gradient, so frozen
    embeddings keep working, and it replays the forward pass's dropout masks)."""
    if not getattr(encoder, "supports_gradient_checkpointing", False):
        kind = type(encoder).__name__ if encoder is not None else "a student without a transformers encoder"
        raise TrainingError(f"--gradient-checkpointing: {kind} does not support gradient checkpointing")
    kwargs = {"use_reentrant": False}
    if hasattr(encoder, "activation_checkpointing_enable"):  # newer transformers deprecate the other name
        encoder.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
    else:
        encoder.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)  # type: ignore[attr-defined]
    logger.info("gradient checkpointing: the encoder's layer activations are recomputed in the backward")


def lr_schedule(cfg: TrainConfig, n_steps: int):
    """Per-step learning-rate factor: linear warm-up from ``warmup_start_factor`` x lr, then linear
    decay to 0 (default) or a half cosine (MEXMA's recipe). The same arithmetic as transformers'
    ``get_linear_schedule_with_warmup`` / ``get_cosine_schedule_with_warmup`` when the warm-up
    starts at 0."""
    warm = cfg.warmup_steps(n_steps)
    start = cfg.warmup_start_factor

    def factor(step: int) -> float:
        if step < warm:
            return start + (1.0 - start) * float(step) / float(max(1, warm))
        if cfg.schedule == "linear":
            return max(0.0, float(n_steps - step) / float(max(1, n_steps - warm)))
        progress = float(step - warm) / float(max(1, n_steps - warm))
        return max(0.0, 0.5 * (1.0 + math.cos(math.pi * progress)))

    return factor


def joining_schedule(cfg: TrainConfig, n_steps: int, joins_at: int):
    """The factor of parameters that join the run at step ``joins_at`` (the encoder after MEXMA's
    head warm-up): 0 before, then :func:`lr_schedule` over the remaining steps (its own warm-up)."""
    rest = lr_schedule(cfg, max(1, n_steps - joins_at))

    def factor(step: int) -> float:
        return 0.0 if step < joins_at else rest(step - joins_at)

    return factor


def make_optimizer(
    params: list[torch.nn.Parameter],
    cfg: TrainConfig,
    n_steps: int,
    head_params: list[torch.nn.Parameter] | None = None,
):
    """AdamW and the schedule. AdamW is torch's fused implementation (one kernel per step on a GPU),
    which takes a device-side ``found_inf`` flag: the trainer's non-finite guard skips a step with it
    exactly, without a host sync (:mod:`~babelspace.training.step_guard`).

    ``head_params`` (the objective's own modules, e.g. MEXMA's unmasking head), when given, form a
    second group at ``--head-lr`` on the whole run's schedule, while ``params`` (the student) join
    after ``--head-warmup-steps`` on a schedule of their own (:func:`joining_schedule`)."""
    lr = cfg.learning_rate()
    if head_params is None:
        optimizer = torch.optim.AdamW(params, lr=lr, weight_decay=cfg.weight_decay, fused=True)
        return optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, lr_schedule(cfg, n_steps))
    groups = [{"params": params, "lr": lr}, {"params": head_params, "lr": cfg.head_lr or lr}]
    optimizer = torch.optim.AdamW(groups, lr=lr, weight_decay=cfg.weight_decay, fused=True)
    factors = [joining_schedule(cfg, n_steps, cfg.head_warmup_steps), lr_schedule(cfg, n_steps)]
    return optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, factors)


def split_head_params(
    objective: torch.nn.Module, student: torch.nn.Module, cfg: TrainConfig
) -> tuple[list[torch.nn.Parameter], list[torch.nn.Parameter] | None]:
    """The trainable parameters as (student's, objective's own) when the run gives the head its own
    learning rate or warm-up (``--head-lr``, ``--head-warmup-steps``), else (all, None). A weight the
    head shares with the student (MEXMA's tied output) counts as the student's."""
    trainable = [p for p in objective.parameters() if p.requires_grad]
    if cfg.head_lr is None and not cfg.head_warmup_steps:
        return trainable, None
    own = {id(p) for p in student.parameters()}
    return [p for p in trainable if id(p) in own], [p for p in trainable if id(p) not in own]
