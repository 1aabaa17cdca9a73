"""``--help`` reads as a user's page: no developer markup, no "(default: None)", each default said
once; ``train --help`` shows the essential options first and fits a screenful or two, ``--help-all``
shows every option."""

from __future__ import annotations

import argparse
import re

import pytest

from babelspace.cli import build_parser


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def _helps() -> dict[str, str]:
    from babelspace.cli.config_flags import format_help

    out = {"babelspace": build_parser().format_help()}
    for name, p in _subparsers().items():
        out[name] = p.format_help()
        out[f"{name} --help-all"] = format_help(p, None)
    return out


@pytest.mark.parametrize("name", sorted(_helps()))
def test_help_has_no_markup_and_no_none_default(name: str) -> None:
    text = _helps()[name]
    for bad in ("(default: None)", ":mod:", ":func:", ":class:", "``"):
        assert bad not in text, f"{name} --help shows {bad!r}"


@pytest.mark.parametrize("command", sorted(_subparsers()))
def test_each_default_is_said_once(command: str) -> None:
    p = _subparsers()[command]
    formatter = p._get_formatter()
    doubled = []
    for action in p._actions:
        if not action.help or action.help == argparse.SUPPRESS:
            continue
        text = formatter._expand_help(action)
        if len(re.findall(r"default:|\(default\)", text)) > 1 or ("(unset:" in text and "(default:" in text):
            doubled.append(f"{action.option_strings or action.dest}: {text}")
    assert doubled == []


def test_train_help_shows_the_essentials_first_and_help_all_the_rest(capsys) -> None:
    from babelspace.cli import main

    with pytest.raises(SystemExit):
        main(["train", "--help"])
    short = capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["train", "--help-all"])
    everything = capsys.readouterr().out
    essentials = ["--teacher", "--student", "--data", "--out", "--objective", "--recipe", "--max-steps",
                  "--epochs", "--batch-size", "--lr", "--device", "--precision"]  # fmt: skip
    where = [short.index(f"\n  {flag} ") for flag in essentials]
    assert where == sorted(where)
    assert len(short.splitlines()) < 100 and "--mask-ratio" not in short and "--help-all" in short
    assert "--mask-ratio" in everything and "--decoder-layers" in everything
    flags = {s for a in _subparsers()["train"]._actions for s in a.option_strings}
    assert all(f" {flag}" in everything for flag in flags)
    recipe = short[short.index("--recipe {") : short.index("--max-steps")]
    assert len(recipe.splitlines()) <= 14  # one line per recipe and the link, not every preset's settings
