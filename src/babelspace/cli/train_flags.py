"""How ``babelspace train`` declares its flags: :func:`opt` (a flag whose absence leaves the recipe's or
the config's value, with the config default in its help) and the option groups of the objectives,
one group per objective, shown under its own heading in ``--help``."""

from __future__ import annotations

import argparse
from typing import Any

from babelspace.cli.argtypes import finite_float, non_negative_int, positive_int
from babelspace.training.config import TrainConfig

DEFAULTS = TrainConfig()


def opt(group, flag: str, help: str = "", default_text: str | None = None, **kwargs: Any) -> None:
    """An option whose absence leaves the recipe's (or the config's) value: the default shown in
    ``--help`` is the config default (or ``default_text``), the value only reaches the config when given."""
    name = kwargs.get("dest") or flag.lstrip("-").replace("-", "_")
    default = default_text if default_text is not None else _show(getattr(DEFAULTS, name, None))
    shown = "" if kwargs.get("action") in {"store_true", "store_false"} else f" (default: {default})"
    group.add_argument(flag, default=argparse.SUPPRESS, help=help + shown, **kwargs)


def _show(value: Any) -> str:
    return " ".join(map(str, value)) if isinstance(value, list) else str(value)


def add_objective_groups(p: argparse.ArgumentParser) -> None:
    """One option group per objective, in this order in ``--help``."""
    _add_distillation(p)
    _add_mexma(p)
    c = p.add_argument_group("contrastive (LaBSE-style)")
    opt(c, "--contrastive-scale", "logit scale", type=finite_float)
    opt(c, "--contrastive-margin", "additive margin on the positive", type=finite_float)
    b = p.add_argument_group("translation bottleneck (LASER/SONAR; docs/objectives.md; --koleo-weight too)")
    opt(b, "--decoder-layers", "decoder layers", type=positive_int)
    opt(b, "--decoder-heads", "decoder attention heads", type=positive_int)
    opt(b, "--decoder-dropout", "decoder dropout", type=finite_float)
    opt(
        b,
        "--decoder-vocab",
        "target vocabulary: the N most frequent target token ids of the training pairs, the rest "
        "<unk> (0: the tokenizer's whole vocabulary)",
        type=non_negative_int,
    )
    opt(b, "--autoencode-weight", "SONAR (denoising) auto-encoding weight", type=finite_float)
    opt(
        b,
        "--denoise-ratio",
        "share of the encoder's input tokens masked or dropped for auto-encoding (0: plain)",
        type=finite_float,
    )
    opt(b, "--align-weight", "SONAR MSE between the pair's sentence vectors", type=finite_float)


def _add_distillation(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("distillation (Reimers & Gurevych 2020; docs/distillation.md)")
    opt(
        g,
        "--loss-reduction",
        "paper: sum over dimensions, mean over pairs; elementwise: sentence-transformers' MSELoss",
        choices=["paper", "elementwise"],
    )
    opt(
        g,
        "--projection",
        "add a Dense projection always, only when dimensions differ (auto), or never (unset: auto for --student teacher, else always)",
        choices=["always", "auto", "none"],
    )
    opt(
        g,
        "--projection-init",
        "initialise the projection in closed form on the distillation loss, or randomly",
        choices=["lstsq", "random"],
    )
    opt(g, "--projection-fit-pairs", "pairs for the closed-form fit", type=positive_int)
    opt(
        g,
        "--projection-fit-english",
        "distinct English sentences of the training sources (equal shares per source) also in the "
        "closed-form fit, first term only (0: none)",
        type=non_negative_int,
    )
    opt(
        g,
        "--projection-prior",
        "what the closed-form fit's ridge pulls towards",
        choices=["procrustes", "zero"],
    )
    opt(
        g,
        "--projection-ridge",
        "ridge strength (unset: 1.0 with procrustes, 0.01 with zero)",
        type=finite_float,
    )
    g.add_argument(
        "--center-teacher",
        action=argparse.BooleanOptionalAction,
        default=argparse.SUPPRESS,
        help=f"distil into the mean-centred teacher space; the exported model adds the mean back (default: {DEFAULTS.center_teacher})",
    )
    opt(
        g,
        "--teacher-contrast",
        "weight of the teacher-space contrastive term (0: the paper's MSE only)",
        type=finite_float,
    )
    opt(g, "--teacher-contrast-scale", "its logit scale", type=finite_float)
    opt(
        g,
        "--english-cosine",
        "weight of the English-side cosine term, 1 - cos(student(s) as exported, teacher(s)) (0: none)",
        type=finite_float,
    )
    opt(
        g,
        "--teacher-contrast-space",
        "where the contrastive term ranks: the space the model is exported in (with --export-space teacher: "
        "student + mean against raw teacher vectors, as users query) or the centred space",
        choices=["exported", "centred"],
    )
    opt(g, "--teacher-negatives", "bank size: teacher vectors of other training sentences", type=positive_int)


def _add_mexma(p: argparse.ArgumentParser) -> None:
    m = p.add_argument_group("MEXMA (Janeiro et al. 2025; docs/mexma.md)")
    opt(m, "--mask-ratio", "share of tokens masked", type=finite_float)
    opt(
        m,
        "--mask-selection",
        "exact: round(mask-ratio x n) tokens of each sentence; bernoulli: each token with probability "
        "mask-ratio (the official collator; --recipe mexma-paper)",
        choices=["exact", "bernoulli"],
    )
    opt(
        m,
        "--encoder-attention-dropout",
        "keep attention dropout in the encoder (official MEXMA: off)",
        action="store_true",
    )
    opt(
        m,
        "--unmasking",
        "unmask with the other language's sentence vector (cross) or the own (mono)",
        choices=["cross", "mono"],
    )
    m.add_argument(
        "--token-gradients",
        choices=["on", "off"],
        default=argparse.SUPPRESS,
        help="the unmasking loss's gradient through the masked token states into the encoder; off "
        "cuts that path only (the tied output weight still trains the word embeddings) (default: on)",
    )
    opt(
        m,
        "--align",
        "which sentence vectors the alignment compares",
        choices=["clean", "masked", "masked_clean"],
    )
    opt(
        m,
        "--koleo-weight",
        "KoLeo weight (None: 0.01 for mexma, as the official code; 0 for bottleneck, as LASER/SONAR)",
        type=finite_float,
    )
    opt(m, "--head-layers", "unmasking head layers", type=positive_int)
    opt(m, "--head-heads", "unmasking head attention heads", type=positive_int)
    opt(
        m,
        "--head-ffn",
        "unmasking head FFN width (unset: 4 x hidden; official MEXMA: 3072)",
        type=positive_int,
    )
