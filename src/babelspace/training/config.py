"""Training configuration: one typed dataclass, validated at construction (the CLI fills it, the
trainer reads it; each field that is a flag carries its help and group, the parser is built from
them); the recipe presets that set several fields at once: ``training/recipes.py``."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from babelspace.config_fields import option
from babelspace.errors import TrainingError
from babelspace.objectives import parse_objective_spec
from babelspace.training.config_checks import check_config

#: Steps of a run that sets neither ``max_steps`` nor ``epochs`` (sized for a 2-core CPU).
DEFAULT_MAX_STEPS = 120
#: Tokens per sentence in training when --max-seq-length is unset (the saved model keeps its own).
TRAIN_MAX_SEQ_LENGTH = 128
# The default --data of each objective (`default_data`). Distillation: the general-domain mix
# (docs/distillation.md, "Beyond the Bible"): Bible verses half of every batch, CLDR names and
# phrases a quarter, English-only everyday, technical and UI text (a sentence paired with itself:
# the teacher's vector of s is the target for the student's s) the rest.
DEFAULT_DATA = ("bible", "cldr:0.5", "mono-en:fortunes:0.2", "mono-en:pydoc:0.2", "mono-en:pymsg:0.1")
# MEXMA, contrastive and the bottleneck learn from translation pairs (s, t): the Bible's verse
# pairs (21 languages with English). English-only sources are refused for them (config_checks.py).
PARALLEL_DATA = ("bible",)

# The groups of ``babelspace train --help``, in this order (a field's group: its ``option``).
RUN, MODELS, DATA, OUTPUT, OPTIM = "run", "models", "data", "output", "optimisation"
RUNTIME, EVAL, ROBUST = "devices and precision (docs/training.md)", "evaluation and export", "robustness"
DISTILL = "distillation (Reimers & Gurevych 2020; docs/distillation.md)"
MEXMA = "MEXMA (Janeiro et al. 2025; docs/mexma.md)"
CONTRAST = "contrastive (LaBSE-style)"
BOTTLENECK = (
    "translation bottleneck (LASER/SONAR; docs/objectives.md; --koleo-weight and --sentence-mse-weight too)"
)


@dataclass
class TrainConfig:
    """Every option of a training run. A field made with :func:`option` is a ``babelspace train``
    flag (its help, group and parsing in the field's metadata; ``cli/train_flags.py`` builds the
    parser from them); the others (``recipe``: ``--recipe``, ``bucket_by_length``) are set otherwise."""

    # --recipe is declared by the CLI (its help lists what each preset sets)
    recipe: Literal["babelspace", "babelspace-long", "paper", "mexma-paper", "mexma-cpu"] = "babelspace"
    objective: str = option(
        "distill",
        "distill | mexma | contrastive | bottleneck, or a '+'-joined composition (mexma+distill); mexma "
        "alone under the default recipe runs the mexma-cpu recipe",
        RUN,
    )
    objective_weights: str | None = option(
        None, "comma-separated weights for a composition, e.g. 1,0.5", RUN, shown="1 for each objective"
    )
    seed: int = option(42, "random seed", RUN)
    teacher: str = option("minilm", "teacher: 'minilm', a local folder or a hub id", MODELS, metavar="MODEL")
    student: str = option(
        "e5-small", "student: 'e5-small', 'teacher' (copy), a folder or hub id", MODELS, metavar="MODEL"
    )
    # None: the objective's default, `default_data` (DEFAULT_DATA for distill, PARALLEL_DATA else)
    data: list[str] | None = option(
        None,
        "corpora, each NAME or NAME:WEIGHT (a weight is the source's share of every batch): 'bible', a "
        "source listed by 'babelspace resources' (cldr, mono-en:...), a TSV, JSON Lines, CSV or Parquet file "
        "(or a folder of them), `babelspace mine` output, two line-aligned files 'aligned:SRC_FILE+TGT_FILE', "
        "a Hugging Face dataset folder or a Hub dataset id 'owner/name[:subset][@revision]' (files, folders "
        "and Hub datasets are converted once into a memory-mapped Arrow cache); the "
        "English-only mono-en sources (a sentence paired with itself) train --objective distill only",
        DATA,
        nargs="+",
        metavar="SPEC",
        shown=f"{' '.join(DEFAULT_DATA)} for distill; {' '.join(PARALLEL_DATA)} for mexma, "
        "contrastive, bottleneck and compositions with them",
    )
    src_col: str = option(
        "src",
        "text column of the source side in datasets and JSON/CSV/Parquet files (unset: src, else english)",
        DATA,
    )
    tgt_col: str = option("tgt", "text column of the target side (unset: tgt, else non_english)", DATA)
    src_lang_col: str | None = option(
        None, "per-row source-language column (unset: src_lang when the table has one, else --src-lang)", DATA
    )
    tgt_lang_col: str | None = option(
        None, "per-row target-language column (unset: tgt_lang when the table has one, else --tgt-lang)", DATA
    )
    split: str | None = option(
        None,
        "split of a DatasetDict folder or a folder of data files (unset: its only split, else train) or of "
        "a Hub dataset (unset: train)",
        DATA,
    )
    langs: list[str] | None = option(
        None, "comma-separated language codes to keep (default: all)", DATA, parse="comma_list"
    )
    src_lang: str | None = option(
        None,
        "source language of 2-column TSV / aligned files / mined pairs (en when unset; mined pairs: "
        "from the mining summary)",
        DATA,
    )
    tgt_lang: str | None = option(
        None,
        "target language of 2-column TSV / aligned files / mined pairs (unset: asked for when a file "
        "needs it; mined pairs: from the mining summary)",
        DATA,
    )
    min_score: float | None = option(
        None,
        "babelspace mine output: train only on pairs whose margin score is >= this",
        DATA,
        shown="every pair of the file",
    )
    max_pairs: int | None = option(
        None, "cap training pairs (stratified sample)", DATA, min=1, shown="every pair"
    )
    skip_bad_lines: bool = option(False, "skip and count malformed lines instead of failing", DATA)
    dev_pairs: int = option(
        200,
        "dev pairs (held out from non-Bible data; at most 10%% of a corpus, at least 10); 0: no dev set "
        "(with --model-from final), for a corpus too small to spare one",
        DATA,
        min=0,
    )
    output: Path = option(
        Path("output/babelspace-student"),
        "the output folder: the saved model, its checkpoints and run log",
        OUTPUT,
        flag="--out",
        metavar="DIR",
    )
    overwrite: bool = option(
        False, "replace a previous babelspace output (and its checkpoints) in --out", OUTPUT
    )
    report_to: Literal["none", "tensorboard", "wandb", "mlflow"] = option(
        "none",
        "also send the training loss (at each read, every --log-every steps) and the dev scores (every "
        "--eval-every steps) to this experiment tracker, through accelerate; its local files go to "
        "OUT/runs (TensorBoard: tensorboard --logdir OUT/runs)",
        OUTPUT,
    )
    batch_size: int | Literal["auto"] = option(
        16,
        "pairs per forward pass (the global batch under torchrun); 'auto': the largest that fits the GPU "
        "(probed with a real forward/backward, halving on out-of-memory; an error on the CPU)",
        OPTIM,
        parse="batch_size",
    )
    grad_accum: int = option(
        1,
        "forward passes per optimizer step: a step sees batch-size x grad-accum pairs; the schedule and "
        "--epochs count optimizer steps",
        OPTIM,
        min=1,
    )
    log_every: int = option(
        10, "steps between reads of the loss and the clip/non-finite counters from the device", OPTIM, min=1
    )
    lr: float | None = option(  # None: the objective's default (see learning_rate)
        None, "peak learning rate (unset: 1e-4 for distill, 2e-5 otherwise)", OPTIM, above=0
    )
    weight_decay: float = option(0.0, "AdamW weight decay", OPTIM, min=0)
    warmup: int = option(10, "linear warm-up steps", OPTIM, min=0)
    warmup_ratio: float | None = option(
        None, "warm-up as a share of the steps (overrides --warmup)", OPTIM, shown="--warmup decides"
    )
    warmup_start_factor: float = option(0.0, "warm-up starts at this x lr", OPTIM, min=0)
    schedule: Literal["linear", "cosine"] = option("linear", "learning-rate decay after the warm-up", OPTIM)
    epochs: float | None = option(
        None, "training epochs", OPTIM, exclusive="length", above=0, shown="--max-steps decides"
    )
    # None with epochs None: DEFAULT_MAX_STEPS; with epochs set, the epochs decide (both set: max_steps)
    max_steps: int | None = option(
        None, "training steps", OPTIM, exclusive="length", min=1, shown=f"{DEFAULT_MAX_STEPS}, or --epochs"
    )
    # None: TRAIN_MAX_SEQ_LENGTH in training, the base model's own in the saved model, so it reads
    # long sentences as its base model does
    max_seq_length: int | None = option(
        None,
        "tokens per sentence in training and in the saved model (longer ones are truncated and counted)",
        OPTIM,
        min=1,
        shown="128 in training, the base model's own in the saved model (512 for e5-small)",
    )
    grad_clip: float = option(
        1.0,
        "clip the global gradient norm of the loss as reduced (0: none); clipped steps are counted in "
        "the summary. Its meaning depends on --loss-reduction (docs/training.md)",
        OPTIM,
        min=0,
    )
    # None: frozen for distill (measured, docs/distillation.md), trainable otherwise
    freeze_embeddings: bool | None = option(
        None,
        group=OPTIM,
        pair={
            "--train-embeddings": (
                False,
                "also update the word-embedding matrix (default for all but distill)",
            ),
            "--freeze-embeddings": (True, "keep the word-embedding matrix fixed (default for distill)"),
        },
    )
    train_layers: int | None = option(
        None, "train only the top N transformer layers", OPTIM, min=1, shown="every layer"
    )
    gradient_checkpointing: bool = option(
        False,
        "recompute the encoder's layer activations in the backward pass instead of keeping them "
        "(less memory, slower steps; docs/performance.md)",
        OPTIM,
    )
    sampling: Literal["balanced", "proportional", "random"] = option(
        "balanced",
        "balanced per language pair (the paper), proportional, or random (plain shuffled batches over "
        "the whole corpus, as MEXMA's official code; never length-bucketed)",
        OPTIM,
    )
    bucket_by_length: bool = True
    loader_workers: int | None = option(
        None,
        "processes that read and tokenize the next batches while a step runs (unset: 2 on a GPU, "
        "0 = the main thread elsewhere)",
        OPTIM,
        min=0,
    )
    token_cache: Literal["auto", "on", "off"] = option(
        "auto",
        "look the batches' token ids up in a token cache built once per corpus, tokenizer, max length and "
        "prompt (auto: use one that exists, build one when that tokenizes no more texts than the run would; "
        "docs/performance.md)",
        OPTIM,
    )
    device: str = option(
        "auto",
        "auto | cpu | cuda | cuda:N | mps (auto: cuda, else mps, else cpu; cuda:$LOCAL_RANK under torchrun)",
        RUNTIME,
    )
    precision: Literal["auto", "fp32", "bf16", "fp16"] = option(
        "auto", "auto = bf16 on GPUs that support it, fp16 on older GPUs, fp32 on CPU", RUNTIME
    )
    gather_negatives: bool = option(
        False,
        "under torchrun, every process's pairs are in-batch negatives for all (contrastive, KoLeo)",
        RUNTIME,
    )
    threads: int | None = option(None, "torch CPU threads", RUNTIME, min=1, shown="torch's choice")
    cache_dir: Path | None = option(None, "teacher-vector and model cache (default: user cache)", RUNTIME)
    eval_every: int = option(40, "dev evaluation every N steps", EVAL, min=1)
    model_from: Literal["best", "final"] = option(
        "best",
        "which step's weights the saved model has: the best on the dev check, or the final step's",
        EVAL,
    )
    export_space: Literal["teacher", "centred"] = option(
        "teacher",
        "with --center-teacher: the teacher's raw space (mean added back, a drop-in for the teacher) or the "
        "centred space (better cosine queries against raw teacher vectors)",
        EVAL,
    )
    # "teacher": mean + r · c/|c|, r derived for the unit-norm teacher targets; it raises the MSE to
    # the teacher (docs/distillation.md)
    export_norm: Literal["teacher", "free"] = option(
        "teacher",
        "with --export-space teacher: 'teacher' gives every exported vector's centred part the teacher's RMS "
        "distance from its mean (cosine queries against raw teacher vectors then do not favour vectors near "
        "the mean); 'free' adds the mean to the student's output as it is",
        EVAL,
    )
    # the table's last row: the 95% half-width of each mean
    test_sentences: int = option(100, "verses per language in the final table (0: skip)", EVAL, min=0)
    save_every: int | None = option(
        None, "write a resumable checkpoint every N steps", ROBUST, min=1, shown="only when interrupted"
    )
    keep_last: int | None = option(2, "checkpoints of this run to keep", ROBUST, min=1)
    resume: bool = option(False, "continue from the newest good checkpoint in --out", ROBUST)
    force_resume: bool = option(
        False, "resume even if the corpus or trajectory settings changed (recorded in the run log)", ROBUST
    )
    skip_nonfinite: int = option(0, "skip up to N batches with NaN/Inf loss or gradient", ROBUST, min=0)
    drop_identical: bool = option(False, "drop pairs whose source equals the target", ROBUST)
    loss_reduction: Literal["paper", "elementwise"] = option(
        "paper",
        "paper: sum over dimensions, mean over pairs; elementwise: sentence-transformers' MSELoss",
        DISTILL,
    )
    projection: Literal["always", "auto", "none"] | None = option(
        None,
        "add a Dense projection always, only when dimensions differ (auto), or never (unset: auto for "
        "--student teacher, else always)",
        DISTILL,
    )
    projection_init: Literal["lstsq", "random"] = option(
        "lstsq", "initialise the projection in closed form on the distillation loss, or randomly", DISTILL
    )
    projection_fit_pairs: int = option(1500, "pairs for the closed-form fit", DISTILL, min=1)
    projection_fit_english: int = option(  # docs/distillation.md, "English fidelity"
        3000,
        "distinct English sentences of the training sources (equal shares per source) also in the "
        "closed-form fit, first term only (0: none)",
        DISTILL,
        min=0,
    )
    projection_prior: Literal["procrustes", "zero"] = option(
        "procrustes", "what the closed-form fit's ridge pulls towards", DISTILL
    )
    projection_ridge: float | None = option(
        None, "ridge strength (unset: 1.0 with procrustes, 0.01 with zero)", DISTILL, min=0
    )
    center_teacher: bool = option(
        True,
        "distil into the mean-centred teacher space; the exported model adds the mean back",
        DISTILL,
        negatable=True,
    )
    teacher_contrast: float = option(
        1.0, "weight of the teacher-space contrastive term (0: the paper's MSE only)", DISTILL, min=0
    )
    teacher_contrast_scale: float = option(20.0, "its logit scale", DISTILL, above=0)
    english_cosine: float = option(  # docs/distillation.md, "English fidelity"
        2.0,
        "weight of the English-side cosine term, 1 - cos(student(s) as exported, teacher(s)) (0: none)",
        DISTILL,
        min=0,
    )
    teacher_contrast_space: Literal["exported", "centred"] = option(
        "exported",
        "where the contrastive term ranks: the space the model is exported in (with --export-space teacher: "
        "student + mean against raw teacher vectors, as users query) or the centred space",
        DISTILL,
    )
    teacher_negatives: int = option(
        4096, "bank size: teacher vectors of other training sentences", DISTILL, min=1
    )
    mask_ratio: float = option(0.4, "share of tokens masked", MEXMA)
    mask_selection: Literal["exact", "bernoulli"] = option(
        "exact",
        "exact: round(mask-ratio x n) tokens of each sentence; bernoulli: each token with probability "
        "mask-ratio (the official collator; --recipe mexma-paper)",
        MEXMA,
    )
    encoder_attention_dropout: bool = option(
        False, "keep attention dropout in the encoder (official MEXMA: off)", MEXMA
    )
    unmasking: Literal["cross", "mono"] = option(
        "cross", "unmask with the other language's sentence vector (cross) or the own (mono)", MEXMA
    )
    token_gradients: bool = option(
        True,
        "the unmasking loss's gradient through the masked token states into the encoder; off "
        "cuts that path only (the tied output weight still trains the word embeddings)",
        MEXMA,
        choices={"on": True, "off": False},
    )
    mse_views: Literal["clean", "masked", "masked_clean"] = option(
        "clean",
        "which sentence vectors the sentence MSE compares: the two clean CLS (the paper), the two masked "
        "ones, or each masked one with the other language's clean one",
        MEXMA,
    )
    sentence_mse_weight: float | None = option(  # None: the objective's default (sentence_mse_for)
        None,
        "weight of the MSE between the sentence vectors of a pair",
        MEXMA,
        min=0,
        shown="1 for mexma, as the paper; 0 for bottleneck (SONAR's is 1)",
    )
    head_warmup_steps: int = option(
        0,
        "the first N steps train MEXMA's unmasking head alone (encoder frozen, unmasking loss only); the "
        "encoder joins after them with its own learning-rate warm-up (0: off, as the paper)",
        MEXMA,
        min=0,
    )
    head_lr: float | None = option(
        None, "learning rate of MEXMA's unmasking head (unset: --lr)", MEXMA, above=0
    )
    unmask_vocab: Literal["full", "batch"] = option(
        "full",
        "the unmasking softmax over the whole vocabulary (the paper) or over the token ids of the batch "
        "only (a CPU shortcut, a deviation from the paper: docs/mexma.md)",
        MEXMA,
    )
    koleo_weight: float | None = option(  # None: the objective's default (koleo_for)
        None,
        "KoLeo weight (unset: 0.01 for mexma, as the official code; 0 for bottleneck, as LASER/SONAR)",
        MEXMA,
        min=0,
    )
    head_layers: int = option(6, "unmasking head layers", MEXMA, min=1)
    head_heads: int = option(8, "unmasking head attention heads", MEXMA, min=1)
    head_ffn: int | None = option(
        None, "unmasking head FFN width (unset: 4 x hidden; official MEXMA: 3072)", MEXMA, min=1
    )
    contrastive_scale: float = option(20.0, "logit scale", CONTRAST, above=0)
    contrastive_margin: float = option(0.3, "additive margin on the positive", CONTRAST)
    decoder_layers: int = option(2, "decoder layers", BOTTLENECK, min=1)
    decoder_heads: int = option(4, "decoder attention heads", BOTTLENECK, min=1)
    decoder_dropout: float = option(0.1, "decoder dropout", BOTTLENECK)
    decoder_vocab: int = option(
        0,
        "target vocabulary: the N most frequent target token ids of the training pairs, the rest "
        "<unk> (0: the tokenizer's whole vocabulary)",
        BOTTLENECK,
        min=0,
    )
    autoencode_weight: float = option(0.0, "SONAR (denoising) auto-encoding weight", BOTTLENECK, min=0)
    denoise_ratio: float = option(
        0.15, "share of the encoder's input tokens masked or dropped for auto-encoding (0: plain)", BOTTLENECK
    )

    def __post_init__(self) -> None:
        self.output = Path(self.output)
        if self.cache_dir is not None:
            self.cache_dir = Path(self.cache_dir)
        if isinstance(self.data, str):
            self.data = [self.data]
        if isinstance(self.langs, str):  # a config file's "de,fr", as --langs de,fr reads
            self.langs = [code.strip() for code in self.langs.split(",") if code.strip()]
        if self.max_steps is None and self.epochs is None:
            self.max_steps = DEFAULT_MAX_STEPS
        self.objective = "+".join(name for name, _ in self.objective_spec)  # canonical: lower case
        if self.data is None:
            self.data = list(default_data(self.objective_names))
        check_config(self, PARALLEL_DATA)

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

    def sentence_mse_for(self, objective: str) -> float:
        """``sentence_mse_weight`` if set, else the objective's default: 1 for ``mexma`` (the paper's
        weight) and 0 for ``bottleneck`` (LASER has none; SONAR's variant sets 1)."""
        if self.sentence_mse_weight is not None:
            return self.sentence_mse_weight
        return 1.0 if objective == "mexma" else 0.0

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


def default_data(objectives: list[str]) -> tuple[str, ...]:
    """The ``--data`` a run gets when it gives none: the distillation mix for ``distill`` alone,
    translation pairs only (PARALLEL_DATA) as soon as an objective learns from pairs."""
    return DEFAULT_DATA if set(objectives) == {"distill"} else PARALLEL_DATA
