"""Build the student and the objective named by ``--objective`` (``distill``, ``mexma``,
``contrastive``, or a ``+``-joined composition such as ``mexma+distill``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from sentence_transformers import SentenceTransformer

from babelspace.data.pairs import ParallelPair
from babelspace.errors import TrainingError
from babelspace.models.encoder import load_encoder, make_student
from babelspace.objectives.base import Objective
from babelspace.objectives.composite import CompositeObjective
from babelspace.training.config import TrainConfig
from babelspace.training.setup.phases import TeacherTargets

#: The training pairs an objective counts from (the bottleneck's vocabulary), or None.
Pairs = Sequence[ParallelPair] | None


def build_student(
    cfg: TrainConfig, teacher: SentenceTransformer | None, names: list[str], device: str | None = None
) -> SentenceTransformer:
    """The student on ``device`` (default: the teacher's device, else the CPU), at
    ``--max-seq-length`` when set, else at its base model's own length (what the saved model keeps;
    the trainer then sets the training length, ``cfg.train_seq_length``)."""
    if device is None and teacher is not None:
        device = str(teacher.device)
    base_spec = cfg.teacher if cfg.student == "teacher" else cfg.student
    if "mexma" in names:
        from babelspace.objectives.mexma import make_mexma_student

        student = make_mexma_student(
            load_encoder(base_spec, device=device, max_seq_length=cfg.max_seq_length)
        )
        if teacher is not None:
            student = make_student(student, teacher, projection="auto", max_seq_length=cfg.max_seq_length)
        return student
    if teacher is not None:
        # The paper's student: its raw output is what the MSE fits (no final Normalize).
        return make_student(
            cfg.student,
            teacher,
            projection=cfg.projection_mode,
            max_seq_length=cfg.max_seq_length,
            drop_normalize=True,
        )
    return load_encoder(base_spec, device=device, max_seq_length=cfg.max_seq_length)


def _distill(
    cfg: TrainConfig, student: SentenceTransformer, targets: TeacherTargets, _pairs: Pairs
) -> Objective:
    from babelspace.objectives.distillation import DistillationObjective

    if targets.cache is None:
        raise TrainingError("the distill objective needs a teacher")
    raw_space = _contrast_in_raw_space(cfg)
    return DistillationObjective(
        student,
        targets.cache.lookup,
        reduction=cfg.loss_reduction,
        max_seq_length=cfg.train_seq_length,
        teacher_shift=targets.shift,
        contrast_weight=cfg.teacher_contrast if targets.bank is not None else 0.0,
        contrast_bank=targets.bank,
        contrast_scale=cfg.teacher_contrast_scale,
        contrast_offset=targets.shift if raw_space else None,
        contrast_radius=targets.radius if raw_space else None,
        english_cosine=cfg.english_cosine,
    )


def _contrast_in_raw_space(cfg: TrainConfig) -> bool:
    """The contrastive term ranks in the exported space, and that space is the teacher's raw one
    (the mean added back at export)."""
    return cfg.teacher_contrast_space == "exported" and cfg.export_space == "teacher"


def _mexma(
    cfg: TrainConfig, student: SentenceTransformer, _targets: TeacherTargets, _pairs: Pairs
) -> Objective:
    from babelspace.objectives.mexma import MexmaObjective

    return MexmaObjective(
        student,
        mask_ratio=cfg.mask_ratio,
        mask_selection=cfg.mask_selection,
        unmasking=cfg.unmasking,
        token_gradients=cfg.token_gradients,
        mse_views=cfg.mse_views,
        sentence_mse_weight=cfg.sentence_mse_for("mexma"),
        unmask_vocab=cfg.unmask_vocab,
        head_warmup_steps=cfg.head_warmup_steps,
        koleo_weight=cfg.koleo_for("mexma"),
        head_layers=cfg.head_layers,
        head_heads=cfg.head_heads,
        head_ffn=cfg.head_ffn,
        gather_negatives=cfg.gather_negatives,
        encoder_attention_dropout=cfg.encoder_attention_dropout,
    )


def _contrastive(
    cfg: TrainConfig, student: SentenceTransformer, _targets: TeacherTargets, _pairs: Pairs
) -> Objective:
    from babelspace.objectives.contrastive import ContrastiveObjective

    return ContrastiveObjective(
        student,
        scale=cfg.contrastive_scale,
        margin=cfg.contrastive_margin,
        gather_negatives=cfg.gather_negatives,
    )


def _bottleneck(
    cfg: TrainConfig, student: SentenceTransformer, _targets: TeacherTargets, train_pairs: Pairs
) -> Objective:
    """The translation-bottleneck objective; with ``--decoder-vocab N`` its target vocabulary is
    counted from ``train_pairs`` (the same on every process and at every resume of the same data).
    The decoder's target languages are those of ``train_pairs`` and ``--langs`` (sorted)."""
    from babelspace.objectives.bottleneck import BottleneckObjective, target_vocab

    pairs = train_pairs or []
    languages = sorted({p.src_lang for p in pairs} | {p.tgt_lang for p in pairs} | set(cfg.langs or []))
    try:
        vocab = None
        if cfg.decoder_vocab:
            vocab = target_vocab(student, pairs, cfg.decoder_vocab, cfg.train_seq_length)
        return BottleneckObjective(
            student,
            decoder_layers=cfg.decoder_layers,
            decoder_heads=cfg.decoder_heads,
            autoencode_weight=cfg.autoencode_weight,
            sentence_mse_weight=cfg.sentence_mse_for("bottleneck"),
            koleo_weight=cfg.koleo_for("bottleneck"),
            decoder_dropout=cfg.decoder_dropout,
            max_seq_length=cfg.train_seq_length,
            decoder_vocab=vocab,
            gather_negatives=cfg.gather_negatives,
            languages=languages or None,
            denoise_ratio=cfg.denoise_ratio,
        )
    except ValueError as exc:
        raise TrainingError(f"--objective bottleneck: {exc}") from exc


#: One builder per objective name, each called as ``(cfg, student, teacher targets, training pairs)``.
_BUILDERS: dict[str, Callable[[TrainConfig, SentenceTransformer, TeacherTargets, Pairs], Objective]] = {
    "distill": _distill,
    "mexma": _mexma,
    "contrastive": _contrastive,
    "bottleneck": _bottleneck,
}


def build_objective(
    cfg: TrainConfig,
    student: SentenceTransformer,
    targets: TeacherTargets,
    train_pairs: Pairs = None,
) -> Objective:
    """The objective (or composition) of ``cfg.objective``. ``targets``: what distillation reads
    from the teacher (its cached vectors, the mean they are centred by, the contrastive bank, and
    the export's norm of the centred part, ``--export-norm teacher``, which the contrastive term
    ranks with); ``train_pairs`` feed what is counted from the data (the bottleneck's
    ``--decoder-vocab``)."""
    parsed = cfg.objective_spec
    unknown = [name for name, _ in parsed if name not in _BUILDERS]
    if unknown:
        raise TrainingError(f"unknown objective {unknown[0]!r}")
    if len(parsed) == 1 and parsed[0][1] == 1.0:
        return _BUILDERS[parsed[0][0]](cfg, student, targets, train_pairs)
    return CompositeObjective(
        {name: _BUILDERS[name](cfg, student, targets, train_pairs) for name, _ in parsed},
        {name: w for name, w in parsed},
    )
