"""``babelspace train``: parse the options into a :class:`TrainConfig` (a ``--recipe`` preset, a
``--config`` file, then every flag the user gave on top), call :func:`babelspace.api.train`, print
the summary. The flags are built from the config's fields (``cli/config_flags.py``); ``--help``
shows the essential ones, ``--help-all`` every one; no training logic lives here."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from babelspace.cli.config_flags import ConfigFlags, add_two_level_help, opt
from babelspace.training.config import RUN, TrainConfig
from babelspace.training.recipes import RECIPE_SUMMARIES, RECIPES

#: The group ``--help`` shows, and its flags in this order (``recipe`` and ``config`` are not fields).
ESSENTIAL = "essential options (every other option: --help-all)"
ESSENTIAL_FLAGS = ("teacher", "student", "data", "output", "objective", "recipe", "max_steps", "epochs",
                   "batch_size", "lr", "device", "precision", "config")  # fmt: skip


def _recipe_help() -> str:
    lines = [f"{name}: {RECIPE_SUMMARIES[name]}" for name in RECIPES]
    return (
        "a preset of several options (flags given override it). "
        + "; ".join(lines)
        + (". What each sets: docs/training.md, 'Recipes'")
    )


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
        description="Train a multilingual sentence encoder. Every option has a default; --recipe sets "
        "several. See docs/training.md.",
        usage="%(prog)s [--teacher MODEL] [--student MODEL] [--data SPEC ...] [--out DIR] [options]",
        formatter_class=_FlagWrappingFormatter,
        add_help=False,
    )
    add_two_level_help(p, (ESSENTIAL,))
    flags = ConfigFlags(TrainConfig)
    g = p.add_argument_group(ESSENTIAL)
    for name in ESSENTIAL_FLAGS:
        if name == "recipe":
            opt(g, "--recipe", _recipe_help(), "babelspace", choices=list(RECIPES))
        elif name == "config":
            opt(g, "--config", "a YAML or JSON file of training options (TrainConfig's field names, e.g. "
                "max_steps: 240; a run's babelspace_training.json works too); flags given on the command "
                "line override it", type=Path, metavar="FILE")  # fmt: skip
        else:
            flags.add(g, name)
    flags.add_all(p, {ESSENTIAL: g, RUN: p.add_argument_group(RUN)})  # the rest, each in its group
    from babelspace.cli.push import add_hub_arguments

    add_hub_arguments(p.add_argument_group("publish (Hugging Face Hub)"), repo_flag=True)
    p.set_defaults(func=run_train)


def config_from_args(args: argparse.Namespace) -> TrainConfig:
    """The recipe's preset, then a ``--config`` file's values, then every option the user gave
    (absent options keep the preset's or the config's default). Invalid values raise
    :class:`TrainingError` naming the flag."""
    from babelspace.errors import TrainingError
    from babelspace.training.recipes import apply_recipe

    skip = {"func", "command", "verbose", "argv", "push_to_hub", "hub_private"}  # the last two: run_train's
    given = {k: v for k, v in vars(args).items() if k not in skip}
    if "config" in given:
        from babelspace.training.config_file import read_config_file

        given = {**read_config_file(given.pop("config")), **given}
    recipe = given.pop("recipe", "babelspace")
    if isinstance(given.get("langs"), str):  # a config file's "de,fr"
        given["langs"] = [v.strip() for v in given["langs"].split(",") if v.strip()] or None
    return apply_recipe(recipe, ConfigFlags(TrainConfig).values(given, error=TrainingError))


def run_train(args: argparse.Namespace) -> int:
    import time

    from babelspace.api import train

    t0 = time.perf_counter()
    cfg = config_from_args(args)
    command = shlex.join(["babelspace", *getattr(args, "argv", sys.argv[1:])])
    result = train(
        cfg,
        command=command,
        push_to_hub=getattr(args, "push_to_hub", None),
        hub_private=getattr(args, "hub_private", False),
    )
    if not result.is_main:
        return 0  # under torchrun the main process alone builds the table, writes the card and prints
    from babelspace.cli.train_summary import print_summary

    print_summary(result.config or cfg, result, result.table, time.perf_counter() - t0)
    if result.pushed_url:
        print(f"uploaded {result.output} to {result.pushed_url}")
    return 0
