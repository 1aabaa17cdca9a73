"""The recipe presets (``--recipe``): the fields each sets at once, and :func:`apply_recipe`, which
builds a :class:`~babelspace.training.config.TrainConfig` from a preset and the values given
explicitly on top (``training/regimes.py``: what a paper preset still does differently)."""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from babelspace.errors import TrainingError
from babelspace.training.config import TrainConfig

# What each recipe sets (an explicit flag still overrides it; see `apply_recipe`).
RECIPES: dict[str, dict[str, Any]] = {
    # babelspace's CPU-budget default (docs/distillation.md): the field defaults below.
    "babelspace": {},
    # The default with more compute, for a closer drop-in (docs/distillation.md, "Levers for the
    # drop-in"): 6,000 English sentences in the closed-form fit (the default: 3,000), four times the
    # steps. Measured: Bible xx->T(en) 90.3 against 87.7 for the same levers at 120 steps, English
    # cosine up on every register of bench/ood.py; 4x the training time.
    "babelspace-long": {"max_steps": 480, "projection_fit_english": 6000},
    # Reimers & Gurevych 2020, §3, in the regime of sentence-transformers' reference script
    # (examples/training/multilingual/make_multilingual.py): the MSE alone on raw teacher vectors,
    # elementwise-mean reduced as its MSELoss (so the clip threshold 1.0 means what it means there),
    # everything trains, batch 64, lr 2e-5, warm-up 10% of the run then linear decay, 5 epochs,
    # the final model saved; a Dense layer only when the dimensions differ (randomly initialised).
    "paper": {
        "teacher_contrast": 0.0,
        "english_cosine": 0.0,
        "projection_fit_english": 0,
        "center_teacher": False,
        "freeze_embeddings": False,
        "lr": 2e-5,
        "warmup_ratio": 0.1,
        "schedule": "linear",
        "batch_size": 64,
        "epochs": 5.0,
        "max_steps": None,
        "model_from": "final",
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
        "model_from": "final",
        # the options that are not the paper's, at the paper's values
        "head_warmup_steps": 0,
        "unmask_vocab": "full",
    },
    # MEXMA on a CPU budget, what `--objective mexma` gets under the default recipe (docs/mexma.md,
    # "The CPU regime", where it improves on its untrained start in three seeds): the unmasking head
    # (1 layer) warmed up alone for 20 steps at its own lr 5e-4, then 40 joint steps at lr 5e-5
    # (warm-up 6) over batches of 16 pairs, the unmasking softmax over the batch's own token ids, and
    # the sentence terms weighted 100x the paper's against the unmasking CE (sentence MSE 100, KoLeo 1):
    # at the paper's weights the CE's token gradients pull e5-small's CLS apart by language.
    "mexma-cpu": {
        "objective": "mexma",
        "batch_size": 16,
        "max_steps": 60,
        "lr": 5e-5,
        "warmup": 6,
        "head_layers": 1,
        "head_warmup_steps": 20,
        "head_lr": 5e-4,
        "unmask_vocab": "batch",
        "sentence_mse_weight": 100.0,
        "koleo_weight": 1.0,
    },
}
#: The recipe a run of the default recipe gets for each objective that has one of its own.
OBJECTIVE_RECIPES = {"mexma": "mexma-cpu"}


#: One line per recipe, what ``babelspace train --help`` says of it.
RECIPE_SUMMARIES: dict[str, str] = {
    "babelspace": "the default, sized for a 2-core CPU (120 steps, distillation with a closed-form projection)",
    "babelspace-long": "the default with 4x the steps and 6,000 English sentences in the projection fit",
    "paper": "Reimers & Gurevych 2020's regime (MSE only, batch 64, lr 2e-5, 5 epochs)",
    "mexma-paper": "the official MEXMA regime (batch 150 x 2, cosine schedule, 3 epochs)",
    "mexma-cpu": "MEXMA on a CPU budget (what --objective mexma gets by default; 60 steps, sentence terms x100)",
}


def apply_recipe(recipe: str, explicit: dict[str, Any]) -> TrainConfig:
    """A config from a recipe preset, then the values the user set explicitly on top. The default
    recipe with an objective of :data:`OBJECTIVE_RECIPES` (``--objective mexma``) is that
    objective's recipe (``mexma-cpu``), which the config records."""
    if recipe not in RECIPES:
        raise TrainingError(f"--recipe must be one of {', '.join(RECIPES)}, not {recipe!r}")
    known = {f.name for f in fields(TrainConfig)}
    unknown = set(explicit) - known
    if unknown:
        raise TrainingError(f"unknown training options: {', '.join(sorted(unknown))}")
    explicit = dict(explicit)
    if recipe == "babelspace" and explicit.get("objective") in OBJECTIVE_RECIPES:
        recipe = OBJECTIVE_RECIPES[explicit["objective"]]  # e.g. `--objective mexma`: its CPU regime
    if "epochs" in explicit and "max_steps" not in explicit:
        explicit["max_steps"] = None  # epochs given alone decide the length, whatever the preset says
    return TrainConfig(**{**RECIPES[recipe], **explicit, "recipe": recipe})
