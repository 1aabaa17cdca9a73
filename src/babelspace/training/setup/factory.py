"""Build the student and the objective named by ``--objective`` (``distill``, ``mexma``,
``contrastive``, or a ``+``-joined composition such as ``mexma+distill``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from sentence_transformers import SentenceTransformer

from babelspace.data.pairs import ParallelPair
from babelspace.errors import TrainingError
from babelspace.models.encoder import load_encoder, make_student
from babelspace.objectives.base import Objective
from babelspace.objectives.composite import CompositeObjective
from babelspace.training.config import TrainConfig
from babelspace.training.setup.teacher_cache import TeacherCache


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
    cfg: TrainConfig,
    student: SentenceTransformer,
    cache: TeacherCache | None,
    teacher_shift: np.ndarray | None,
    contrast_bank: np.ndarray | None,
    _train_pairs: object = None,
    teacher_radius: float | None = None,
) -> Objective:
    from babelspace.objectives.distillation import DistillationObjective

    if cache is None:
        raise TrainingError("the distill objective needs a teacher")
    return DistillationObjective(
        student,
        cache.lookup,
        reduction=cfg.loss_reduction,
        max_seq_length=cfg.train_seq_length,
        teacher_shift=teacher_shift,
        contrast_weight=cfg.teacher_contrast if contrast_bank is not None else 0.0,
        contrast_bank=contrast_bank,
        contrast_scale=cfg.teacher_contrast_scale,
        contrast_offset=teacher_shift if _contrast_in_raw_space(cfg) else None,
        contrast_radius=teacher_radius if _contrast_in_raw_space(cfg) else None,
        english_cosine=cfg.english_cosine,
    )


def _contrast_in_raw_space(cfg: TrainConfig) -> bool:
    """The contrastive term ranks in the exported space, and that space is the teacher's raw one
    (the mean added back at export)."""
    return cfg.teacher_contrast_space == "exported" and cfg.export_space == "teacher"


def _mexma(cfg: TrainConfig, student: SentenceTransformer, *_teacher: object) -> Objective:
    from babelspace.objectives.mexma import MexmaObjective

    return MexmaObjective(
        student,
        mask_ratio=cfg.mask_ratio,
        mask_selection=cfg.mask_selection,
        unmasking=cfg.unmasking,
        token_gradients=cfg.token_gradients,
        align=cfg.align,
        koleo_weight=cfg.koleo_for("mexma"),
        head_layers=cfg.head_layers,
        head_heads=cfg.head_heads,
        head_ffn=cfg.head_ffn,
        gather_negatives=cfg.gather_negatives,
        encoder_attention_dropout=cfg.encoder_attention_dropout,
    )


def _contrastive(cfg: TrainConfig, student: SentenceTransformer, *_teacher: object) -> Objective:
    from babelspace.objectives.contrastive import ContrastiveObjective

    return ContrastiveObjective(
        student,
        scale=cfg.contrastive_scale,
        margin=cfg.contrastive_margin,
        gather_negatives=cfg.gather_negatives,
    )


def _bottleneck(
    cfg: TrainConfig,
    student: SentenceTransformer,
    _cache: object,
    _shift: object,
    _bank: object,
    train_pairs: Sequence[ParallelPair] | None = None,
    _radius: object = None,
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
            vocab = target_vocab(student, train_pairs or [], cfg.decoder_vocab, cfg.train_seq_length)
        return BottleneckObjective(
            student,
            decoder_layers=cfg.decoder_layers,
            decoder_heads=cfg.decoder_heads,
            autoencode_weight=cfg.autoencode_weight,
            align_weight=cfg.align_weight,
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


# One builder per objective name: (cfg, student, teacher cache, teacher shift, contrast bank,
# training pairs, teacher radius).
_BUILDERS: dict[str, Callable[..., Objective]] = {
    "distill": _distill,
    "mexma": _mexma,
    "contrastive": _contrastive,
    "bottleneck": _bottleneck,
}


def _single(
    name: str,
    cfg: TrainConfig,
    student: SentenceTransformer,
    cache: TeacherCache | None,
    teacher_shift: np.ndarray | None = None,
    contrast_bank: np.ndarray | None = None,
    train_pairs: Sequence[ParallelPair] | None = None,
    teacher_radius: float | None = None,
) -> Objective:
    if name not in _BUILDERS:
        raise TrainingError(f"unknown objective {name!r}")
    return _BUILDERS[name](cfg, student, cache, teacher_shift, contrast_bank, train_pairs, teacher_radius)


def build_objective(
    cfg: TrainConfig,
    student: SentenceTransformer,
    cache: TeacherCache | None,
    teacher_shift: np.ndarray | None = None,
    contrast_bank: np.ndarray | None = None,
    train_pairs: Sequence[ParallelPair] | None = None,
    teacher_radius: float | None = None,
) -> Objective:
    """The objective (or composition) of ``cfg.objective``; ``train_pairs`` feed what is counted
    from the data (the bottleneck's ``--decoder-vocab``); ``teacher_radius`` is the export's norm
    of the centred part (``--export-norm teacher``), which the contrastive term then ranks with."""
    parsed = cfg.objective_spec
    args = (cfg, student, cache, teacher_shift, contrast_bank, train_pairs, teacher_radius)
    if len(parsed) == 1 and parsed[0][1] == 1.0:
        return _single(parsed[0][0], *args)
    return CompositeObjective(
        {name: _single(name, *args) for name, _ in parsed},
        {name: w for name, w in parsed},
    )
