"""``babelspace train``'s flags are built from :class:`TrainConfig`'s fields (cli/train_flags.py): one
flag per ``option`` field, in field order under its group, parsed by the field's type and bounds,
its value reaching the field; the few special kinds (a boolean pair, ``--x/--no-x``, on/off words,
a renamed flag, mutually exclusive fields) keep their behaviour."""

from __future__ import annotations

import argparse
from dataclasses import fields
from pathlib import Path

import pytest

from babelspace.cli import build_parser
from babelspace.cli.train import config_from_args
from babelspace.config_fields import flag_name, is_flag, literal_choices
from babelspace.errors import TrainingError
from babelspace.training.config import TrainConfig


def _train_parser() -> argparse.ArgumentParser:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices["train"]


def _cfg(*argv: str) -> TrainConfig:
    return config_from_args(build_parser().parse_args(["train", *argv]))


def test_every_option_field_is_a_flag_in_its_group_in_field_order() -> None:
    """The essential flags come first, in their own group and order (what ``--help`` shows); every
    other field sits in its own group, in field order."""
    from babelspace.cli.train import ESSENTIAL, ESSENTIAL_FLAGS

    groups = {g.title: g._group_actions for g in _train_parser()._action_groups}
    essential = [a.dest for a in groups[ESSENTIAL]]
    assert essential == [{"recipe": "recipe", "config": "config"}.get(n, n) for n in ESSENTIAL_FLAGS]
    for f in (f for f in fields(TrainConfig) if is_flag(f) and f.name not in ESSENTIAL_FLAGS):
        dests = [a.dest for a in groups[f.metadata["group"]]]
        wanted = list(f.metadata["pair"]) if "pair" in f.metadata else [f.name]
        assert set(wanted) <= set(dests), f.name
    by_group: dict[str, list[str]] = {}
    for f in fields(TrainConfig):
        if is_flag(f) and "pair" not in f.metadata and f.name not in ESSENTIAL_FLAGS:
            by_group.setdefault(f.metadata["group"], []).append(f.name)
    for title, names in by_group.items():
        dests = [a.dest for a in groups[title] if a.dest in names]
        assert dests == names, title
    titles = [g.title for g in _train_parser()._action_groups]
    order = list(by_group)  # a group whose flags are all essential ("models") is not shown
    assert titles == ["positional arguments", "options", ESSENTIAL, *order, "publish (Hugging Face Hub)"]


def test_choices_and_argument_types_come_from_the_field() -> None:
    actions = {a.dest: a for a in _train_parser()._actions}
    for name, values in literal_choices(TrainConfig).items():
        if name != "recipe":
            assert actions[name].choices == list(values), name
    assert actions["max_pairs"].type.__name__ == "positive_int"  # min=1
    assert actions["dev_pairs"].type.__name__ == "non_negative_int"  # min=0
    assert actions["seed"].type is int and actions["output"].type is Path
    assert actions["lr"].type.__name__ == "finite_float"
    assert actions["token_gradients"].choices == ["on", "off"]
    hub = {"help", "help_all", "push_to_hub", "hub_private"}
    assert all(a.default is argparse.SUPPRESS for a in actions.values() if a.dest not in hub)


def test_each_kind_of_flag_reaches_its_field() -> None:
    cfg = _cfg(
        "--precision", "fp32", "--batch-size", "auto", "--out", "elsewhere", "--no-center-teacher",
        "--token-gradients", "off", "--train-embeddings", "--data", "a.tsv", "b.tsv", "--langs", "de, fr",
        "--max-seq-length", "64", "--skip-bad-lines",
    )  # fmt: skip
    assert (cfg.precision, cfg.batch_size, cfg.output) == ("fp32", "auto", Path("elsewhere"))
    assert cfg.center_teacher is False and cfg.token_gradients is False and cfg.freeze_embeddings is False
    assert cfg.data == ["a.tsv", "b.tsv"] and cfg.langs == ["de", "fr"] and cfg.max_seq_length == 64
    assert cfg.skip_bad_lines is True
    assert _cfg("--freeze-embeddings").freeze_embeddings is True
    default = _cfg()
    assert default.freeze_embeddings is None and default.token_gradients is True and default.center_teacher


def test_contradictions_and_bad_values_are_one_error() -> None:
    with pytest.raises(TrainingError, match="--train-embeddings and --freeze-embeddings contradict"):
        _cfg("--train-embeddings", "--freeze-embeddings")
    for argv in (["--epochs", "1", "--max-steps", "2"], ["--max-pairs", "0"], ["--precision", "fp8"]):
        with pytest.raises(SystemExit) as exc:
            build_parser().parse_args(["train", *argv])
        assert exc.value.code == 2, argv
    with pytest.raises(TrainingError, match="--train-layers must be a finite number >= 1"):
        TrainConfig(train_layers=0)
    assert flag_name(TrainConfig, "output") == "--out"


def test_a_config_file_sets_pair_and_word_fields(tmp_path: Path) -> None:
    run_yaml = tmp_path / "run.yaml"
    run_yaml.write_text("freeze_embeddings: false\ntoken_gradients: 'off'\n", encoding="utf-8")
    cfg = _cfg("--config", str(run_yaml))
    assert cfg.freeze_embeddings is False and cfg.token_gradients is False  # the first was dropped before
    assert _cfg("--config", str(run_yaml), "--freeze-embeddings").freeze_embeddings is True  # flags win
    run_yaml.write_text("token_gradients: maybe\n", encoding="utf-8")
    with pytest.raises(TrainingError, match="--token-gradients must be one of on, off, not 'maybe'"):
        _cfg("--config", str(run_yaml))
