"""The defaults README.md and docs/ quote (data, steps, export, batch, lr, recipe presets) are the
config's: a changed default fails here until the docs say the new value."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from babelspace.training.config import DEFAULT_DATA, PARALLEL_DATA, TrainConfig
from babelspace.training.recipes import RECIPES

ROOT = Path(__file__).resolve().parents[2]
DEFAULTS = TrainConfig()

#: Preset values docs/training.md's recipe table writes as a flag of their own.
SWITCHES = {
    ("freeze_embeddings", False): "--train-embeddings",
    ("center_teacher", False): "--no-center-teacher",
}


def _text(name: str) -> str:
    return " ".join((ROOT / name).read_text(encoding="utf-8").split())  # line breaks as spaces


def _number(pattern: str, text: str, where: str) -> float:
    match = re.search(pattern, text)
    assert match, f"{where}: no sentence matching {pattern!r}"
    return float(match.group(1).replace(",", ""))


def _row(name: str, start: str) -> str:
    rows = [line for line in (ROOT / name).read_text(encoding="utf-8").splitlines() if line.startswith(start)]
    assert len(rows) == 1, f"{name}: one table row starting {start!r}"
    return rows[0]


def _shows(flags: str, key: str, value: object) -> bool:
    """Whether a recipe's flags give ``key`` the value ``value`` (numbers compared as numbers)."""
    if (key, value) in SWITCHES:
        return SWITCHES[(key, value)] in flags.split()
    match = re.search(rf"--{key.replace('_', '-')} ([^\s`]+)", flags)
    if match is None:
        return False
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(match.group(1)) == pytest.approx(float(value))
    return match.group(1) == str(value)


def test_readme_quotes_the_default_run() -> None:
    text = _text("README.md")
    assert f"`--data {' '.join(DEFAULT_DATA)}`" in text, "README: the default --data mix"
    quoted = {
        r"balanced batches of (\d+) pairs": DEFAULTS.batch_size,
        r"pairs, (\d+) steps, AdamW": DEFAULTS.max_steps,
        r"AdamW lr ([\d.e-]+) with": DEFAULTS.learning_rate(),
        r"with (\d+) warm-up steps": DEFAULTS.warmup,
        r"closed form on ([\d,]+) pairs": DEFAULTS.projection_fit_pairs,
        r"dev check every (\d+) steps": DEFAULTS.eval_every,
        r"on (\d+) dev-book pairs": DEFAULTS.dev_pairs,
    }
    for pattern, value in quoted.items():
        assert _number(pattern, text, "README.md") == pytest.approx(value), pattern
    export = "best" if "The best checkpoint (by dev score) is saved" in text else "final"
    assert export == DEFAULTS.model_from, "README: which model the default run saves"


def test_docs_quote_each_objectives_default_data() -> None:
    training = _text("docs/training.md")
    assert f"`distill` alone trains on the general-domain mix `{' '.join(DEFAULT_DATA)}`" in training
    assert f"them train on `{' '.join(PARALLEL_DATA)}`" in training
    assert f"| data | the general-domain mix `{' '.join(DEFAULT_DATA)}`" in _text("docs/distillation.md")


@pytest.mark.parametrize("recipe", [r for r in RECIPES if RECIPES[r]])
def test_training_md_lists_what_each_recipe_sets(recipe: str) -> None:
    flags = _row("docs/training.md", f"| `{recipe}`").split("|")[3]
    for key, value in RECIPES[recipe].items():
        if value is not None:
            assert _shows(flags, key, value), (
                f"docs/training.md, recipe {recipe}: {key} = {value!r} not listed"
            )


def test_training_md_quotes_the_default_recipe() -> None:
    row = _row("docs/training.md", "| `babelspace`")
    assert _number(r"lr ([\d.e-]+),", row, "docs/training.md") == pytest.approx(DEFAULTS.learning_rate())
    assert _number(r"batch (\d+)", row, "docs/training.md") == DEFAULTS.batch_size
    assert _number(r"(\d+) steps", row, "docs/training.md") == DEFAULTS.max_steps


def test_a_changed_default_is_caught() -> None:
    """The checks compare values: a preset value the table does not show fails."""
    flags = _row("docs/training.md", "| `mexma-paper`").split("|")[3]
    assert _shows(flags, "batch_size", 150) and not _shows(flags, "batch_size", 128)
    assert _shows(flags, "model_from", "final") and not _shows(flags, "model_from", "best")
