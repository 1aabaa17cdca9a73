"""Training configuration (one dataclass; the CLI fills it, the trainer reads it)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class TrainConfig:
    objective: str = "distill"
    teacher: str = "minilm"
    student: str = "e5-small"
    data: list[str] = field(default_factory=lambda: ["bible"])
    langs: list[str] | None = None
    max_pairs: int | None = None
    skip_bad_lines: bool = False
    src_lang: str | None = None
    tgt_lang: str | None = None
    dev_pairs: int = 200
    batch_size: int = 16
    lr: float | None = None  # None: DEFAULT_LR of the objective (see learning_rate)
    weight_decay: float = 0.0
    warmup: int = 10
    epochs: float | None = None
    max_steps: int | None = 120
    max_seq_length: int = 128
    grad_clip: float = 1.0
    eval_every: int = 40
    output: Path = Path("output/babelspace-student")
    seed: int = 42
    # distillation
    loss_reduction: str = "paper"
    projection: str = "always"
    projection_init: str = "lstsq"
    projection_fit_pairs: int = 1500
    projection_prior: str = "procrustes"  # "zero": plain ridge (see docs/distillation.md)
    projection_ridge: float | None = None  # None: 1.0 with the procrustes prior, 0.01 with zero
    center_teacher: bool = True
    teacher_contrast: float = 1.0
    teacher_contrast_scale: float = 20.0
    teacher_negatives: int = 4096
    # what trains
    freeze_embeddings: bool = True
    train_layers: int | None = None
    # batching
    sampling: str = "balanced"
    bucket_by_length: bool = True
    # final table on held-out test data
    test_sentences: int = 200
    export: str = "best"  # "best" (by dev score) or "final" (the last step's weights)
    cache_dir: Path | None = None
    threads: int | None = None
    # robustness
    save_every: int | None = None
    keep_last: int | None = 2
    resume: bool = False
    force_resume: bool = False
    skip_nonfinite: int = 0
    drop_identical: bool = False
    # MEXMA (REFERENCE.md §2) and contrastive (LaBSE) options
    objective_weights: str | None = None
    mask_ratio: float = 0.4
    unmasking: str = "cross"
    token_gradients: bool = True
    align: str = "clean"
    koleo_weight: float = 0.01
    head_layers: int = 6
    head_heads: int = 8
    contrastive_scale: float = 20.0
    contrastive_margin: float = 0.3

    def learning_rate(self) -> float:
        """``lr`` if set, else 1e-4 for ``distill`` (its short CPU default run starts from the
        closed-form projection and measured better at 1e-4 than 2e-5; docs/distillation.md) and
        2e-5 for every other objective or composition."""
        if self.lr is not None:
            return self.lr
        return 1e-4 if self.objective == "distill" else 2e-5

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for k, v in d.items():
            if isinstance(v, Path):
                d[k] = str(v)
        return d
