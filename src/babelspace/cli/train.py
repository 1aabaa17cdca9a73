"""``babelspace train``: parse the options into a :class:`TrainConfig` (a ``--recipe`` preset, a
``--config`` file, then every flag the user gave on top), run it, print the summary. The flags are
built from the config's fields (``cli/train_flags.py``); no training logic lives here."""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from pathlib import Path

from babelspace.cli.train_flags import add_config_flags, config_values, opt
from babelspace.training.config import RUN, TrainConfig
from babelspace.training.recipes import RECIPES


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


class _FlagWrappingFormatter(argparse.HelpFormatter):
    """argparse's formatter, but a line never breaks inside a flag (``--teacher-`` / ``contrast``)."""

    def _split_lines(self, text: str, width: int) -> list[str]:
        import textwrap

        return textwrap.wrap(" ".join(text.split()), width, break_on_hyphens=False)


def add_train_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "train",
        help="train a multilingual student (default: distil minilm into e5-small on the Bible + CLDR + "
        "English-only mix; other objectives on the Bible's translation pairs)",
        description="Train a multilingual sentence encoder. Every option has a default; --recipe sets several.",
        formatter_class=_FlagWrappingFormatter,
    )
    g = p.add_argument_group(RUN)
    g.add_argument(
        "--config",
        type=Path,
        default=argparse.SUPPRESS,
        metavar="FILE",
        help="a YAML or JSON file of training options (TrainConfig's field names, e.g. max_steps: 240; "
        "a run's babelspace_training.json works too); flags given on the command line override it",
    )
    opt(g, "--recipe", _recipe_help(), choices=list(RECIPES))
    add_config_flags(p, {RUN: g})  # every TrainConfig field that is a flag, in its group
    from babelspace.cli.push import add_hub_arguments

    add_hub_arguments(p.add_argument_group("publish (Hugging Face Hub)"), repo_flag=True)
    p.set_defaults(func=run_train)


def config_from_args(args: argparse.Namespace) -> TrainConfig:
    """The recipe's preset, then a ``--config`` file's values, then every option the user gave
    (absent options keep the preset's or the config's default). Invalid values raise
    :class:`TrainingError` naming the flag."""
    from babelspace.training.recipes import apply_recipe

    skip = {"func", "command", "verbose", "argv", "push_to_hub", "hub_private"}  # the last two: run_train's
    given = {k: v for k, v in vars(args).items() if k not in skip}
    if "config" in given:
        from babelspace.training.config_file import read_config_file

        given = {**read_config_file(given.pop("config")), **given}
    recipe = given.pop("recipe", "babelspace")
    if isinstance(given.get("langs"), str):
        given["langs"] = [v.strip() for v in given["langs"].split(",") if v.strip()] or None
    return apply_recipe(recipe, config_values(given))


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
