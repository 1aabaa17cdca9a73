"""Training configuration: one typed dataclass, validated at construction (the CLI fills it, the
trainer reads it), and the recipe presets that set several of its fields at once."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, Literal, get_args

from babelspace.errors import TrainingError
from babelspace.objectives import parse_objective_spec

Recipe = Literal["babelspace", "paper", "mexma-paper"]
Precision = Literal["auto", "fp32", "bf16", "fp16"]
Schedule = Literal["linear", "cosine"]
Reduction = Literal["paper", "elementwise"]
ProjectionMode = Literal["always", "auto", "none"]
ProjectionInit = Literal["lstsq", "random"]
ProjectionPrior = Literal["procrustes", "zero"]
Sampling = Literal["balanced", "proportional", "random"]
Export = Literal["best", "final"]
ExportSpace = Literal["teacher", "centred"]
ContrastSpace = Literal["exported", "centred"]
ExportNorm = Literal["teacher", "free"]
Unmasking = Literal["cross", "mono"]
MaskSelection = Literal["exact", "bernoulli"]
Align = Literal["clean", "masked", "masked_clean"]
TokenCache = Literal["auto", "on", "off"]
ReportTo = Literal["none", "tensorboard", "wandb", "mlflow"]

#: Steps of a run that sets neither ``max_steps`` nor ``epochs`` (sized for a 2-core CPU).
DEFAULT_MAX_STEPS = 120
# The default --data of each objective (`default_data`). Distillation: the general-domain mix
# (docs/distillation.md, "Beyond the Bible"): Bible verses half of every batch, CLDR names and
# phrases a quarter, English-only everyday, technical and UI text (a sentence paired with itself:
# the teacher's vector of s is the target for the student's s) the rest.
#: Tokens per sentence in training when --max-seq-length is unset (the saved model keeps its own).
TRAIN_MAX_SEQ_LENGTH = 128

DEFAULT_DATA = ("bible", "cldr:0.5", "mono-en:fortunes:0.2", "mono-en:pydoc:0.2", "mono-en:pymsg:0.1")
# MEXMA, contrastive and the bottleneck learn from translation pairs (s, t): the Bible's verse
# pairs (21 languages with English). English-only sources are refused for them (`_check_data`).
PARALLEL_DATA = ("bible",)

# What each recipe sets (an explicit flag still overrides it; see `apply_recipe`).
RECIPES: dict[str, dict[str, Any]] = {
    # babelspace's CPU-budget default (docs/distillation.md): the field defaults below.
    "babelspace": {},
    # Reimers & Gurevych 2020, §3, in the regime of sentence-transformers' reference script
    # (examples/training/multilingual/make_multilingual.py): the MSE alone on raw teacher vectors,
    # elementwise-mean reduced as its MSELoss (so the clip threshold 1.0 means what it means there),
    # everything trains, batch 64, lr 2e-5, warm-up 10% of the run then linear decay, 5 epochs,
    # the final model saved; a Dense layer only when the dimensions differ (randomly initialised).
    "paper": {
        "teacher_contrast": 0.0,
        "center_teacher": False,
        "freeze_embeddings": False,
        "lr": 2e-5,
        "warmup_ratio": 0.1,
        "schedule": "linear",
        "batch_size": 64,
        "epochs": 5.0,
        "max_steps": None,
        "export": "final",
        "projection": "auto",
        "projection_init": "random",
        "loss_reduction": "elementwise",
    },
    # The official MEXMA README (facebookresearch/mexma): lr 1e-4, cosine schedule with a linear
    # warm-up over the first 30% of steps from 0.1 x lr, gradient clip 1.2, max length 200,
    # loss weights 1 (alignment) / 1 (unmasking) / 0.01 (KoLeo), all parameters train; and its
    # regime: 150 pairs per GPU x 2 accumulation steps (KoLeo over the 150), plain shuffled batches,
    # 3 epochs, the unmasking head's FFN fixed at 3072.
    "mexma-paper": {
        "objective": "mexma",
        "batch_size": 150,
        "grad_accum": 2,
        "sampling": "random",
        "epochs": 3.0,
        "max_steps": None,
        "head_ffn": 3072,
        "lr": 1e-4,
        "schedule": "cosine",
        "warmup_ratio": 0.3,
        "warmup_start_factor": 0.1,
        "grad_clip": 1.2,
        "max_seq_length": 200,
        "koleo_weight": 0.01,
        "freeze_embeddings": False,
        # its collator: each token masked with probability 0.4 (Bernoulli); its weights: the last saved
        "mask_selection": "bernoulli",
        "export": "final",
    },
}


@dataclass
class TrainConfig:
    objective: str = "distill"
    recipe: Recipe = "babelspace"
    teacher: str = "minilm"
    student: str = "e5-small"
    # None: the objective's default, `default_data` (DEFAULT_DATA for distill, PARALLEL_DATA else)
    data: list[str] | None = None
    langs: list[str] | None = None
    max_pairs: int | None = None
    skip_bad_lines: bool = False
    # columns of dataset folders and Hub datasets (docs/training.md, "Corpora larger than RAM")
    src_col: str = "src"
    tgt_col: str = "tgt"
    src_lang_col: str | None = None
    tgt_lang_col: str | None = None
    split: str | None = None  # of a DatasetDict folder (unset: its only split, else train) or a Hub dataset
    loader_workers: int | None = None  # None: 2 on a GPU, 0 (the main thread) elsewhere
    # token ids looked up instead of tokenized (training/setup/token_plan.py); auto: a missing
    # cache is built when that tokenizes no more texts than the run would
    token_cache: TokenCache = "auto"
    src_lang: str | None = None
    tgt_lang: str | None = None
    min_score: float | None = None  # `babelspace mine` output: keep pairs whose margin score is >= this
    dev_pairs: int = 200
    batch_size: int | Literal["auto"] = 16  # pairs per forward pass (global); "auto": probed on a GPU
    grad_accum: int = 1  # forward passes per optimizer step: a step sees batch_size x grad_accum pairs
    log_every: int = 10  # steps between reads of the loss, clip and non-finite counters (host syncs)
    # experiment tracker (accelerate's) for the loss and dev scores; local files in <output>/runs
    report_to: ReportTo = "none"
    lr: float | None = None  # None: the objective's default (see learning_rate)
    weight_decay: float = 0.0
    warmup: int = 10
    warmup_ratio: float | None = None  # share of the steps; overrides ``warmup`` when set
    warmup_start_factor: float = 0.0  # warm-up starts at this x lr
    schedule: Schedule = "linear"
    epochs: float | None = None
    # None with epochs None: DEFAULT_MAX_STEPS; with epochs set, the epochs decide (both set: max_steps)
    max_steps: int | None = None
    # tokens per sentence; None: TRAIN_MAX_SEQ_LENGTH in training, the base model's own (512 for
    # e5-small) in the saved model, so it reads long sentences as its base model does
    max_seq_length: int | None = None
    grad_clip: float = 1.0
    eval_every: int = 40
    output: Path = Path("output/babelspace-student")
    seed: int = 42
    # where and how it runs
    device: str = "auto"
    precision: Precision = "auto"
    gather_negatives: bool = False
    # distillation
    loss_reduction: Reduction = "paper"
    projection: ProjectionMode | None = None  # None: "auto" for a teacher copy, else "always"
    projection_init: ProjectionInit = "lstsq"
    projection_fit_pairs: int = 1500
    # distinct English sentences of the training sources (equal shares per source) added to the
    # closed-form fit, first term only (docs/distillation.md, "English fidelity"); 0: none
    projection_fit_english: int = 0
    projection_prior: ProjectionPrior = "procrustes"
    projection_ridge: float | None = None  # None: 1.0 with the procrustes prior, 0.01 with zero
    center_teacher: bool = True
    teacher_contrast: float = 1.0
    teacher_contrast_scale: float = 20.0
    # weight of the English-side cosine term: 1 - cos(exported student(s), teacher(s)) per pair
    english_cosine: float = 0.0
    teacher_negatives: int = 4096
    # the space the teacher-space contrastive term ranks in: the one the model is exported in
    # (with --export-space teacher: the mean added back, against raw teacher vectors) or centred
    teacher_contrast_space: ContrastSpace = "exported"
    # what trains; None: frozen for distill (measured, docs/distillation.md), trainable otherwise
    freeze_embeddings: bool | None = None
    train_layers: int | None = None
    # the encoder's own activation checkpointing: layer activations recomputed in the backward
    gradient_checkpointing: bool = False
    # batching
    sampling: Sampling = "balanced"
    bucket_by_length: bool = True
    # final table on held-out test data
    test_sentences: int = 100  # per language; the table's last row: the 95% half-width of each mean
    export: Export = "best"
    # with --center-teacher: "teacher" exports into the space of the teacher's L2-normalised vectors
    # (the mean added back: queried by cosine against the teacher's vectors); "centred" leaves the
    # mean out (cosine queries against raw teacher vectors then avoid the mean's hub bias;
    # docs/distillation.md)
    export_space: ExportSpace = "teacher"
    # with --export-space teacher: "teacher" gives every exported vector's centred part the
    # teacher's RMS distance from its mean (mean + r · c/|c|, derived for the unit-norm teacher
    # targets; cosine queries against the teacher's vectors then do not favour vectors near the
    # mean; it raises the MSE to the teacher, docs/distillation.md); "free" exports mean + c
    export_norm: ExportNorm = "teacher"
    cache_dir: Path | None = None
    threads: int | None = None
    # robustness
    save_every: int | None = None
    keep_last: int | None = 2
    resume: bool = False
    force_resume: bool = False
    overwrite: bool = False
    skip_nonfinite: int = 0
    drop_identical: bool = False
    # MEXMA (Janeiro et al. 2025, §3) and contrastive (LaBSE, Feng et al. 2022) options
    objective_weights: str | None = None
    mask_ratio: float = 0.4
    # "exact": round(mask_ratio x n) tokens of each sentence (stochastic rounding); "bernoulli": each
    # token with probability mask_ratio (the official MEXMA collator; --recipe mexma-paper)
    mask_selection: MaskSelection = "exact"
    encoder_attention_dropout: bool = False  # official MEXMA: off in the encoder as in the head
    unmasking: Unmasking = "cross"
    token_gradients: bool = True
    align: Align = "clean"
    koleo_weight: float | None = None  # None: the objective's default (koleo_for)
    head_layers: int = 6
    head_heads: int = 8
    head_ffn: int | None = None  # the unmasking head's FFN width; None: 4 x hidden
    # translation bottleneck (LASER / SONAR; docs/objectives.md)
    decoder_layers: int = 2
    decoder_heads: int = 4
    decoder_dropout: float = 0.1
    decoder_vocab: int = 0  # 0: the full tokenizer vocabulary; N: the N most frequent target ids
    autoencode_weight: float = 0.0
    denoise_ratio: float = 0.15  # auto-encoding reads its input with this share masked or dropped
    align_weight: float = 0.0
    contrastive_scale: float = 20.0
    contrastive_margin: float = 0.3

    def __post_init__(self) -> None:
        self.output = Path(self.output)
        if self.cache_dir is not None:
            self.cache_dir = Path(self.cache_dir)
        if isinstance(self.data, str):
            self.data = [self.data]
        if self.max_steps is None and self.epochs is None:
            self.max_steps = DEFAULT_MAX_STEPS
        self.objective = "+".join(name for name, _ in self.objective_spec)  # canonical: lower case
        if self.data is None:
            self.data = list(default_data(self.objective_names))
        _check_choices(self)
        _check_ranges(self)
        _check_data(self)
        _check_min_score(self)
        _check_dev(self)

    @property
    def objective_spec(self) -> list[tuple[str, float]]:
        """``[(name, weight), ...]`` of ``--objective``/``--objective-weights`` (TrainingError if bad)."""
        try:
            return parse_objective_spec(self.objective, self.objective_weights)
        except ValueError as exc:
            raise TrainingError(f"--objective {self.objective!r}: {exc}") from exc

    @property
    def objective_names(self) -> list[str]:
        return [name for name, _ in self.objective_spec]

    @property
    def projection_mode(self) -> str:
        """A copy of the teacher already lives in the teacher's space: it gets no projection unless
        asked (the paper's setting); any other student gets one, fitted in closed form."""
        if self.projection is not None:
            return self.projection
        return "auto" if self.student == "teacher" else "always"

    @property
    def frozen_embeddings(self) -> bool:
        """Whether the word-embedding matrix is frozen: as set, else only for plain ``distill``
        (MEXMA's unmasking head is tied to it, and the contrastive objective trains everything)."""
        if self.freeze_embeddings is not None:
            return self.freeze_embeddings
        return self.objective_names == ["distill"]

    @property
    def train_seq_length(self) -> int:
        """Tokens per sentence in training: ``--max-seq-length``, else `TRAIN_MAX_SEQ_LENGTH`."""
        return self.max_seq_length or TRAIN_MAX_SEQ_LENGTH

    @property
    def pairs_per_step(self) -> int:
        """Pairs of one optimizer step (all processes): ``batch_size`` x ``grad_accum``; the planned
        batches and ``--epochs`` count these steps (``batch_size`` must be resolved from "auto")."""
        if not isinstance(self.batch_size, int):
            raise TrainingError("--batch-size auto is resolved when the run starts, on its device")
        return self.batch_size * self.grad_accum

    def learning_rate(self) -> float:
        """``lr`` if set, else 1e-4 for ``distill`` (its short CPU default run starts from the
        closed-form projection and measured better at 1e-4 than 2e-5; docs/distillation.md) and
        2e-5 for every other objective or composition."""
        if self.lr is not None:
            return self.lr
        return 1e-4 if self.objective == "distill" else 2e-5

    def koleo_for(self, objective: str) -> float:
        """``koleo_weight`` if set, else the objective's default: 0.01 for ``mexma`` (the official
        code's weight) and 0 for ``bottleneck`` (LASER and SONAR have no KoLeo)."""
        if self.koleo_weight is not None:
            return self.koleo_weight
        return 0.01 if objective == "mexma" else 0.0

    def warmup_steps(self, total_steps: int) -> int:
        if self.warmup_ratio is not None:
            return int(round(self.warmup_ratio * total_steps))
        return min(self.warmup, total_steps)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for k, v in d.items():
            if isinstance(v, Path):
                d[k] = str(v)
        return d


def _check_choices(cfg: TrainConfig) -> None:
    """Every ``Literal`` field holds one of its values (the CLI's ``choices`` say the same)."""
    hints = {
        "recipe": Recipe,
        "precision": Precision,
        "schedule": Schedule,
        "loss_reduction": Reduction,
        "projection": ProjectionMode,
        "projection_init": ProjectionInit,
        "projection_prior": ProjectionPrior,
        "sampling": Sampling,
        "export": Export,
        "export_space": ExportSpace,
        "teacher_contrast_space": ContrastSpace,
        "export_norm": ExportNorm,
        "unmasking": Unmasking,
        "align": Align,
        "mask_selection": MaskSelection,
        "token_cache": TokenCache,
        "report_to": ReportTo,
    }
    for name, kind in hints.items():
        allowed = get_args(kind)
        if name == "projection" and cfg.projection is None:
            continue
        if getattr(cfg, name) not in allowed:
            raise TrainingError(
                f"--{_flag(name)} must be one of {', '.join(allowed)}, not {getattr(cfg, name)!r}"
            )


# (field, lowest allowed value, whether the bound itself is allowed); None values are "unset".
_LOWER_BOUNDS: list[tuple[str, float, bool]] = [
    ("grad_accum", 1, True),
    ("log_every", 1, True),
    ("head_ffn", 1, True),
    ("dev_pairs", 0, True),
    ("max_steps", 1, True),
    ("epochs", 0, False),
    ("max_seq_length", 1, True),
    ("eval_every", 1, True),
    ("max_pairs", 1, True),
    ("projection_fit_pairs", 1, True),
    ("projection_fit_english", 0, True),
    ("english_cosine", 0, True),
    ("teacher_negatives", 1, True),
    ("threads", 1, True),
    ("loader_workers", 0, True),
    ("save_every", 1, True),
    ("keep_last", 1, True),
    ("warmup", 0, True),
    ("test_sentences", 0, True),
    ("skip_nonfinite", 0, True),
    ("weight_decay", 0, True),
    ("grad_clip", 0, True),
    ("teacher_contrast", 0, True),
    ("teacher_contrast_scale", 0, False),
    ("koleo_weight", 0, True),
    ("head_layers", 1, True),
    ("head_heads", 1, True),
    ("contrastive_scale", 0, False),
    ("projection_ridge", 0, True),
    ("warmup_start_factor", 0, True),
    ("decoder_layers", 1, True),
    ("decoder_heads", 1, True),
    ("decoder_vocab", 0, True),
    ("autoencode_weight", 0, True),
    ("align_weight", 0, True),
]


def _check_batch_size(cfg: TrainConfig) -> None:
    """``batch_size`` is a whole number >= 1, or ``"auto"`` (probed on the run's device, which must
    be a GPU: :mod:`~babelspace.training.auto_batch`)."""
    if cfg.batch_size == "auto":
        return
    if isinstance(cfg.batch_size, bool) or not isinstance(cfg.batch_size, int) or cfg.batch_size < 1:
        raise TrainingError(f"--batch-size must be a whole number >= 1 or 'auto', not {cfg.batch_size!r}")


def _check_ranges(cfg: TrainConfig) -> None:
    _check_batch_size(cfg)
    for name, low, inclusive in _LOWER_BOUNDS:
        value = getattr(cfg, name)
        if value is None:
            continue
        if not math.isfinite(value) or value < low or (value == low and not inclusive):
            rel = ">=" if inclusive else ">"
            raise TrainingError(f"--{_flag(name)} must be a finite number {rel} {low:g}, not {value!r}")
    if cfg.lr is not None and not (math.isfinite(cfg.lr) and cfg.lr > 0):
        raise TrainingError(f"--lr must be a finite number > 0, not {cfg.lr!r}")
    if not 0 < cfg.mask_ratio < 1:
        raise TrainingError(f"--mask-ratio must be in (0, 1), not {cfg.mask_ratio!r}")
    if cfg.warmup_ratio is not None and not 0 <= cfg.warmup_ratio <= 1:
        raise TrainingError(f"--warmup-ratio must be in [0, 1], not {cfg.warmup_ratio!r}")
    if 0 < cfg.decoder_vocab <= 3:
        raise TrainingError(
            f"--decoder-vocab must be 0 (the whole vocabulary) or > 3 (<unk>, BOS, EOS), not {cfg.decoder_vocab}"
        )
    for name in ("denoise_ratio", "decoder_dropout", "contrastive_margin"):
        if not 0 <= getattr(cfg, name) < 1:
            raise TrainingError(f"--{_flag(name)} must be in [0, 1), not {getattr(cfg, name)!r}")
    if not cfg.data:
        raise TrainingError("--data needs at least one corpus")


def default_data(objectives: list[str]) -> tuple[str, ...]:
    """The ``--data`` a run gets when it gives none: the distillation mix for ``distill`` alone,
    translation pairs only (PARALLEL_DATA) as soon as an objective learns from pairs."""
    return DEFAULT_DATA if set(objectives) == {"distill"} else PARALLEL_DATA


def _check_data(cfg: TrainConfig) -> None:
    """English-only sources (each row a sentence paired with itself) only with ``distill`` alone:
    for MEXMA, contrastive and the bottleneck an (s, s) pair is a trivial positive or plain copying."""
    from babelspace.data.mix import DataMixError, parse_data_mix
    from babelspace.data.sources import SOURCES

    pair_objectives = [n for n in cfg.objective_names if n != "distill"]
    if not pair_objectives:
        return
    try:
        mix = parse_data_mix(cfg.data)
    except DataMixError:
        return  # reported with its item when the run reads the mix
    mono = [n for n, _ in mix if n in SOURCES and SOURCES[n].items is not None]
    if mono:
        raise TrainingError(
            f"--data {' '.join(mono)}: English-only rows (a sentence paired with itself) train only "
            f"--objective distill, not {', '.join(pair_objectives)}; give translation pairs (default: "
            f"{' '.join(PARALLEL_DATA)})"
        )


#: Config fields whose command-line flag is not the field's name.
FLAG_NAMES = {"output": "out"}


def _check_dev(cfg: TrainConfig) -> None:
    """``--dev-pairs 0`` trains without a dev set (a corpus too small to spare one): no dev score can
    pick a best step, so the run exports its last step (``--export final``)."""
    if cfg.dev_pairs == 0 and cfg.export != "final":
        raise TrainingError(
            "--dev-pairs 0 trains without a dev set, so no dev score can pick the best step: "
            "pass --export final (the last step's weights are saved)"
        )


def _check_min_score(cfg: TrainConfig) -> None:
    """``--min-score`` is a finite number and some ``--data`` corpus is ``babelspace mine`` output."""
    if cfg.min_score is None:
        return
    if not math.isfinite(cfg.min_score):
        raise TrainingError(f"--min-score must be a finite number, not {cfg.min_score!r}")
    from babelspace.data.mined import is_mined_file

    names = [part.strip() for item in cfg.data for part in item.split(",")]
    paths = [Path(n) for n in names] + [Path(n.rpartition(":")[0]) for n in names if ":" in n]
    if not any(p.is_file() and is_mined_file(p) for p in paths):
        raise TrainingError(
            "--min-score keeps mined pairs by their margin score, but no --data corpus is `babelspace mine` "
            "output (score<TAB>src<TAB>tgt)"
        )


def _flag(name: str) -> str:
    return FLAG_NAMES.get(name, name.replace("_", "-"))


def read_config_file(path: str | Path) -> dict[str, Any]:
    """The training options of a YAML or JSON file: a mapping of :class:`TrainConfig` field names
    (``recipe`` included), or a run log ``babelspace_training.json`` (its ``config``). Raises
    :class:`TrainingError` naming the file for a missing file, bad syntax or an unknown option."""
    import json

    import yaml

    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
        data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except OSError as exc:
        raise TrainingError(f"--config {path}: cannot read it ({exc.strerror or exc})") from exc
    except ValueError as exc:  # json's messages name the line and column
        raise TrainingError(f"--config {path}: not valid JSON: {exc}") from exc
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise TrainingError(
            f"--config {path}: not valid YAML{where}: {getattr(exc, 'problem', None) or exc}"
        ) from exc
    if isinstance(data, dict) and isinstance(data.get("config"), dict) and "history" in data:
        data = data["config"]  # a run log: its resolved configuration
    if not isinstance(data, dict):
        raise TrainingError(f"--config {path}: expected a mapping of option names to values")
    known = {f.name for f in fields(TrainConfig)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise TrainingError(f"--config {path}: unknown training options: {', '.join(unknown)}")
    return data


def apply_recipe(recipe: str, explicit: dict[str, Any]) -> TrainConfig:
    """A config from a recipe preset, then the values the user set explicitly on top."""
    if recipe not in RECIPES:
        raise TrainingError(f"--recipe must be one of {', '.join(RECIPES)}, not {recipe!r}")
    known = {f.name for f in fields(TrainConfig)}
    unknown = set(explicit) - known
    if unknown:
        raise TrainingError(f"unknown training options: {', '.join(sorted(unknown))}")
    explicit = dict(explicit)
    if "epochs" in explicit and "max_steps" not in explicit:
        explicit["max_steps"] = None  # epochs given alone decide the length, whatever the preset says
    return TrainConfig(**{**RECIPES[recipe], **explicit, "recipe": recipe})
