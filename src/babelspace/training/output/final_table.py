"""The held-out table that ends ``babelspace train``, from the run's config: which verses, which baselines, and which space the run is tuned for.

The table itself is :class:`babelspace.evaluation.held_out.HeldOutEvaluator`; its baseline columns
come from :func:`babelspace.evaluation.held_out_baselines.baseline_scores`. What needs the training
config lives here: the test verses (``--test-sentences``, ``--langs``, ``--seed``), the baselines'
models (the teacher; the untrained student, or the teacher for ``--student teacher``) and the
encoding settings.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from babelspace.evaluation.held_out import HeldOutEvaluator, held_out_texts
from babelspace.evaluation.held_out_baselines import baseline_scores
from babelspace.models import backends
from babelspace.training.config import TrainConfig

logger = logging.getLogger(__name__)


def tuned_space(cfg: TrainConfig) -> str:
    """Which space the run's model is tuned for (the final table's summary line names it): the one
    its teacher-space contrastive term ranks in, against the teacher's raw vectors."""
    if "distill" not in cfg.objective_names:
        return "own space (no teacher)"
    if not cfg.teacher_contrast:
        return "teacher space, MSE only (no contrastive term; the MSE is the same in both spaces)"
    if cfg.center_teacher and cfg.export_space == "teacher" and cfg.teacher_contrast_space == "centred":
        return "teacher space centred (the export adds the teacher mean back: column centred xx>T(en))"
    return "teacher space as exported (column after xx>T(en))"


def held_out_table(
    cfg: TrainConfig,
    output: str | Path,
    backend: str = "torch",
    quantize: str = "none",
    shift: np.ndarray | None = None,
) -> list[dict[str, float | str]]:
    """The table that ends ``babelspace train``: ``cfg.test_sentences`` Bible test-book verses per
    language. The baseline columns come from :func:`baseline_scores` (shipped or cached); the trained
    model at ``output`` is encoded every run. ``shift``: the teacher mean its export added back."""
    en, per_lang = held_out_texts(cfg.langs, cfg.test_sentences, cfg.seed)
    logger.info("held-out table: %d verses x %d languages", len(en), len(per_lang))
    common = {
        "max_seq_length": cfg.max_seq_length,
        "backend": backend,
        "quantize": quantize,
        "cache_dir": cfg.cache_dir,
    }
    before_spec = cfg.student if cfg.student != "teacher" else cfg.teacher
    baselines, teacher_en = baseline_scores(cfg.teacher, before_spec, en, per_lang, **common)
    after_model = backends.load_backend_encoder(
        str(output), backend, quantize, max_seq_length=cfg.max_seq_length
    )
    return HeldOutEvaluator(en, per_lang, teacher_en, baselines).table(after_model, shift)
