"""``babelspace train``: parse the options into a :class:`TrainConfig` (a ``--recipe`` preset, then
every flag the user gave on top), run it, print the summary. No training logic lives here."""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from pathlib import Path

from babelspace.cli.argtypes import finite_float, non_negative_int, positive_int
from babelspace.cli.train_flags import add_objective_groups, opt
from babelspace.training.config import DEFAULT_DATA, PARALLEL_DATA, RECIPES, TrainConfig


def batch_size_arg(value: str) -> int | str:
    """``--batch-size``: a whole number >= 1, or ``auto``."""
    return "auto" if value == "auto" else positive_int(value)


def _recipe_help() -> str:
    from babelspace.training.regimes import recipe_differences

    lines = []
    for name, preset in RECIPES.items():
        settings = (
            ", ".join(f"--{k.replace('_', '-')} {v}" for k, v in preset.items() if v is not None)
            or "the defaults below"
        )
        differs = recipe_differences(name)
        lines.append(f"{name}: {settings}" + (f" ({differs})" if differs else ""))
    return "preset of several options; flags given explicitly override it. " + "; ".join(lines)


def _add_core(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("run")
    g.add_argument(
        "--config",
        type=Path,
        default=argparse.SUPPRESS,
        metavar="FILE",
        help="a YAML or JSON file of training options (TrainConfig's field names, e.g. max_steps: 240; "
        "a run's babelspace_training.json works too); flags given on the command line override it",
    )
    opt(g, "--recipe", _recipe_help(), choices=list(RECIPES))
    opt(
        g,
        "--objective",
        "distill | mexma | contrastive | bottleneck, or a '+'-joined composition (mexma+distill)",
    )
    opt(g, "--objective-weights", "comma-separated weights for a composition, e.g. 1,0.5")
    opt(g, "--seed", "random seed", type=int)
    g = p.add_argument_group("models")
    opt(g, "--teacher", "teacher: 'minilm', a local folder or a hub id")
    opt(g, "--student", "student: 'e5-small', 'teacher' (copy), a folder or hub id")
    g = p.add_argument_group("data")
    opt(
        g,
        "--data",
        "corpora, each NAME or NAME:WEIGHT (a weight is the source's share of every batch): 'bible', a "
        "source listed by 'babelspace resources' (cldr, mono-en:...), a TSV file, `babelspace mine` output, "
        "'SRC_FILE,TGT_FILE', a Hugging Face dataset folder or a Hub dataset id 'owner/name[:subset]' "
        "(files, folders and Hub datasets are converted once into a memory-mapped Arrow cache); the "
        "English-only mono-en sources (a sentence paired with itself) train --objective distill only",
        default_text=f"{' '.join(DEFAULT_DATA)} for distill; {' '.join(PARALLEL_DATA)} for mexma, "
        "contrastive, bottleneck and compositions with them",
        nargs="+",
    )
    opt(g, "--src-col", "text column of the source side in dataset folders and Hub datasets")
    opt(g, "--tgt-col", "text column of the target side (e.g. non_english)")
    opt(g, "--src-lang-col", "per-row source-language column (unset: --src-lang)")
    opt(g, "--tgt-lang-col", "per-row target-language column (unset: --tgt-lang)")
    opt(
        g,
        "--split",
        "split of a DatasetDict folder (unset: its only split, else train) or of a Hub dataset (unset: train)",
    )
    opt(g, "--langs", "comma-separated language codes to keep (default: all)")
    opt(
        g,
        "--src-lang",
        "source language of 2-column TSV / aligned files / mined pairs (en when unset; mined pairs: "
        "from the mining summary)",
    )
    opt(g, "--tgt-lang", "target language of 2-column TSV / aligned files / mined pairs (idem)")
    opt(
        g,
        "--min-score",
        "`babelspace mine` output: train only on pairs whose margin score is >= this",
        type=finite_float,
    )
    opt(g, "--max-pairs", "cap training pairs (stratified sample)", type=positive_int)
    opt(g, "--skip-bad-lines", "skip and count malformed lines instead of failing", action="store_true")
    opt(
        g,
        "--dev-pairs",
        "dev pairs (held out from non-Bible data; at most 10%% of a corpus, at least 10); 0: no dev set "
        "(with --export final), for a corpus too small to spare one",
        type=non_negative_int,
    )
    g = p.add_argument_group("output")
    opt(
        g,
        "--out",
        "the output folder: the saved model, its checkpoints and run log",
        type=Path,
        dest="output",
    )
    opt(
        g,
        "--overwrite",
        "replace a previous babelspace output (and its checkpoints) in --out",
        action="store_true",
    )
    opt(
        g,
        "--report-to",
        "also send the training loss (at each read, every --log-every steps) and the dev scores (every "
        "--eval-every steps) to this experiment tracker, through accelerate; its local files go to "
        "OUT/runs (TensorBoard: tensorboard --logdir OUT/runs)",
        choices=["none", "tensorboard", "wandb", "mlflow"],
    )


def _add_optimisation(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("optimisation")
    opt(
        g,
        "--batch-size",
        "pairs per forward pass (the global batch under torchrun); 'auto': the largest that fits the GPU "
        "(probed with a real forward/backward, halving on out-of-memory; an error on the CPU)",
        type=batch_size_arg,
    )
    opt(
        g,
        "--grad-accum",
        "forward passes per optimizer step: a step sees batch-size x grad-accum pairs; the schedule and "
        "--epochs count optimizer steps",
        type=positive_int,
    )
    opt(
        g,
        "--log-every",
        "steps between reads of the loss and the clip/non-finite counters from the device",
        type=positive_int,
    )
    opt(g, "--lr", "peak learning rate (unset: 1e-4 for distill, 2e-5 otherwise)", type=finite_float)
    opt(g, "--weight-decay", "AdamW weight decay", type=finite_float)
    opt(g, "--warmup", "linear warm-up steps", type=non_negative_int)
    opt(g, "--warmup-ratio", "warm-up as a share of the steps (overrides --warmup)", type=finite_float)
    opt(g, "--warmup-start-factor", "warm-up starts at this x lr", type=finite_float)
    opt(g, "--schedule", "learning-rate decay after the warm-up", choices=["linear", "cosine"])
    steps = g.add_mutually_exclusive_group()
    opt(steps, "--epochs", "training epochs", type=finite_float)
    opt(steps, "--max-steps", "training steps", type=positive_int)
    opt(
        g,
        "--max-seq-length",
        "tokens per sentence in training and in the saved model (longer ones are truncated and counted)",
        default_text="128 in training, the base model's own in the saved model (512 for e5-small)",
        type=positive_int,
    )
    opt(
        g,
        "--grad-clip",
        "clip the global gradient norm of the loss as reduced (0: none); clipped steps are counted in "
        "the summary. Its meaning depends on --loss-reduction (docs/training.md)",
        type=finite_float,
    )
    opt(
        g,
        "--train-embeddings",
        "also update the word-embedding matrix (default for all but distill)",
        action="store_true",
    )
    opt(
        g,
        "--freeze-embeddings",
        "keep the word-embedding matrix fixed (default for distill)",
        action="store_true",
    )
    opt(g, "--train-layers", "train only the top N transformer layers", type=positive_int)
    opt(
        g,
        "--gradient-checkpointing",
        "recompute the encoder's layer activations in the backward pass instead of keeping them "
        "(less memory, slower steps; docs/performance.md)",
        action="store_true",
    )
    opt(
        g,
        "--sampling",
        "balanced per language pair (the paper), proportional, or random (plain shuffled batches over "
        "the whole corpus, as MEXMA's official code; never length-bucketed)",
        choices=["balanced", "proportional", "random"],
    )
    opt(
        g,
        "--loader-workers",
        "processes that read and tokenize the next batches while a step runs (unset: 2 on a GPU, "
        "0 = the main thread elsewhere)",
        type=non_negative_int,
    )
    opt(
        g,
        "--token-cache",
        "look the batches' token ids up in a token cache built once per corpus, tokenizer, max length and "
        "prompt (auto: use one that exists, build one when that tokenizes no more texts than the run would; "
        "docs/performance.md)",
        choices=["auto", "on", "off"],
    )


def _add_runtime(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("devices and precision (docs/training.md)")
    opt(
        g,
        "--device",
        "auto | cpu | cuda | cuda:N | mps (auto: cuda, else mps, else cpu; cuda:$LOCAL_RANK under torchrun)",
    )
    opt(
        g,
        "--precision",
        "auto = bf16 on GPUs that support it, fp16 on older GPUs, fp32 on CPU",
        choices=["auto", "fp32", "bf16", "fp16"],
    )
    opt(
        g,
        "--gather-negatives",
        "under torchrun, every process's pairs are in-batch negatives for all (contrastive, KoLeo)",
        action="store_true",
    )
    opt(g, "--threads", "torch CPU threads", type=positive_int)
    opt(g, "--cache-dir", "teacher-vector and model cache (default: user cache)", type=Path)
    g = p.add_argument_group("evaluation and export")
    opt(g, "--eval-every", "dev evaluation every N steps", type=positive_int)
    opt(g, "--export", "export the best-dev or the final model", choices=["best", "final"])
    opt(
        g,
        "--export-space",
        "with --center-teacher: the teacher's raw space (mean added back, a drop-in for the teacher) or the centred space (better cosine queries against raw teacher vectors)",
        choices=["teacher", "centred"],
    )
    opt(
        g,
        "--export-norm",
        "with --export-space teacher: 'teacher' gives every exported vector's centred part the teacher's RMS "
        "distance from its mean (cosine queries against raw teacher vectors then do not favour vectors near "
        "the mean); 'free' adds the mean to the student's output as it is",
        choices=["teacher", "free"],
    )
    opt(g, "--test-sentences", "verses per language in the final table (0: skip)", type=non_negative_int)
    r = p.add_argument_group("robustness")
    opt(r, "--save-every", "write a resumable checkpoint every N steps", type=positive_int)
    opt(r, "--keep-last", "checkpoints of this run to keep", type=positive_int)
    opt(r, "--resume", "continue from the newest good checkpoint in --out", action="store_true")
    opt(
        r,
        "--force-resume",
        "resume even if the corpus or trajectory settings changed (recorded in the run log)",
        action="store_true",
    )
    opt(r, "--skip-nonfinite", "skip up to N batches with NaN/Inf loss or gradient", type=non_negative_int)
    opt(r, "--drop-identical", "drop pairs whose source equals the target", action="store_true")


def add_train_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "train",
        help="train a multilingual student (default: distil minilm into e5-small on the Bible + CLDR + "
        "English-only mix; other objectives on the Bible's translation pairs)",
        description="Train a multilingual sentence encoder. Every option has a default; --recipe sets several.",
    )
    _add_core(p)
    _add_optimisation(p)
    _add_runtime(p)
    add_objective_groups(p)
    from babelspace.cli.push import add_hub_arguments

    add_hub_arguments(p.add_argument_group("publish (Hugging Face Hub)"), repo_flag=True)
    p.set_defaults(func=run_train)


def config_from_args(args: argparse.Namespace) -> TrainConfig:
    """The recipe's preset, then every option the user gave (absent options keep the preset's or
    the config's default). Invalid values raise :class:`TrainingError` naming the flag."""
    from babelspace.errors import TrainingError
    from babelspace.training.config import apply_recipe

    skip = {"func", "command", "verbose", "argv", "push_to_hub", "hub_private"}  # the last two: run_train's
    given = {k: v for k, v in vars(args).items() if k not in skip}
    if "config" in given:
        from babelspace.training.config import read_config_file

        given = {**read_config_file(given.pop("config")), **given}
    recipe = given.pop("recipe", "babelspace")
    if isinstance(given.get("langs"), str):
        given["langs"] = [v.strip() for v in given["langs"].split(",") if v.strip()] or None
    train_emb, freeze_emb = given.pop("train_embeddings", False), given.pop("freeze_embeddings", False)
    if train_emb and freeze_emb:
        raise TrainingError("--train-embeddings and --freeze-embeddings contradict each other; give one")
    if train_emb or freeze_emb:
        given["freeze_embeddings"] = freeze_emb
    if isinstance(given.get("token_gradients"), str):
        given["token_gradients"] = given["token_gradients"] == "on"
    return apply_recipe(recipe, given)


def run_train(args: argparse.Namespace) -> int:
    from babelspace.training.run import run

    t0 = time.perf_counter()
    cfg = config_from_args(args)
    push_to = getattr(args, "push_to_hub", None)
    command = shlex.join(["babelspace", *getattr(args, "argv", sys.argv[1:])])
    result = run(cfg, command=command, push_to_hub=push_to, hub_private=getattr(args, "hub_private", False))
    if not result.is_main:
        return 0  # under torchrun the main process alone builds the table, writes the card and prints
    from babelspace.cli.train_summary import print_summary

    print_summary(result.config or cfg, result, result.table, time.perf_counter() - t0)
    if result.pushed_url:
        print(f"uploaded {result.output} to {result.pushed_url}")
    return 0
