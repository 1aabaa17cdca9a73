"""How ``babelspace train`` declares its flags: one per :class:`TrainConfig` field made with
:func:`~babelspace.training.config_fields.option`, in field order under the field's group (so each
objective's options sit under its own heading), read from the field's metadata and type; and
:func:`opt` for the few flags that are not fields. Every flag's absence leaves the recipe's or the
config's value (its argparse default is ``SUPPRESS``); its help shows the config default."""

from __future__ import annotations

import argparse
from dataclasses import Field, fields
from pathlib import Path
from typing import Any

from babelspace.cli.argtypes import finite_float, non_negative_int, positive_int
from babelspace.errors import TrainingError
from babelspace.training.config import TrainConfig
from babelspace.training.config_fields import base_type, flag_name, is_flag, literal_choices

DEFAULTS = TrainConfig()


def batch_size_arg(value: str) -> int | str:
    """``--batch-size``: a whole number >= 1, or ``auto``."""
    return "auto" if value == "auto" else positive_int(value)


#: Argument types a field names with ``parse=``.
PARSERS = {"batch_size": batch_size_arg}


def opt(group, flag: str, help: str = "", default_text: str | None = None, **kwargs: Any) -> None:
    """A flag that is not built from a field's metadata, with the same rules: its absence leaves the
    recipe's (or the config's) value, and ``--help`` shows the config default (or ``default_text``)."""
    name = kwargs.get("dest") or flag.lstrip("-").replace("-", "_")
    default = default_text if default_text is not None else _show(getattr(DEFAULTS, name, None))
    shown = "" if kwargs.get("action") in {"store_true", "store_false"} else f" (default: {default})"
    group.add_argument(flag, default=argparse.SUPPRESS, help=help + shown, **kwargs)


def _show(value: Any) -> str:
    return " ".join(map(str, value)) if isinstance(value, list) else str(value)


def add_config_flags(p: argparse.ArgumentParser, groups: dict[str, argparse._ArgumentGroup]) -> None:
    """Every flag field of :class:`TrainConfig`; a group not in ``groups`` (by title) is added to
    ``p`` where its first field comes, so the groups appear in field order after those given."""
    exclusive: dict[str, argparse._MutuallyExclusiveGroup] = {}
    for f in fields(TrainConfig):
        if not is_flag(f):
            continue
        title = f.metadata["group"]
        if title not in groups:
            groups[title] = p.add_argument_group(title)
        group = groups[title]
        key = f.metadata.get("exclusive")
        if key is not None and key not in exclusive:
            exclusive[key] = group.add_mutually_exclusive_group()
        target = exclusive[key] if key is not None else group
        for flag, kwargs in _arguments(f):
            target.add_argument(flag, default=argparse.SUPPRESS, **kwargs)


def _arguments(f: Field) -> list[tuple[str, dict[str, Any]]]:
    """``[(flag, add_argument keyword arguments), ...]`` of field ``f`` (two for a ``pair``)."""
    meta, default = f.metadata, getattr(DEFAULTS, f.name)
    if "pair" in meta:  # each flag stores its value under its own name; config_values joins them
        return [
            (flag, {"action": "store_const", "const": value, "dest": flag, "help": text})
            for flag, (value, text) in meta["pair"].items()
        ]
    flag = meta.get("flag", "--" + f.name.replace("_", "-"))
    kind = base_type(TrainConfig, f.name)
    kwargs: dict[str, Any] = {"dest": f.name}
    if kind is bool and "choices" not in meta:
        if not meta.get("negatable"):
            return [(flag, {**kwargs, "action": "store_true", "help": meta["help"]})]
        kwargs["action"] = argparse.BooleanOptionalAction
    elif "choices" in meta:
        kwargs["choices"] = list(meta["choices"])
        default = next(word for word, value in meta["choices"].items() if value == default)
    elif f.name in literal_choices(TrainConfig):
        kwargs["choices"] = list(literal_choices(TrainConfig)[f.name])
    else:
        kwargs["type"] = _value_type(f, kind)
    if "nargs" in meta:
        kwargs["nargs"] = meta["nargs"]
    shown = meta.get("shown", _show(default))
    return [(flag, {**kwargs, "help": f"{meta['help']} (default: {shown})"})]


def _value_type(f: Field, kind: type) -> Any:
    """The argparse ``type`` of a field's value: a named parser, a whole number within the field's
    ``min`` (1 or 0), a finite float, a path, or the text as it is."""
    if "parse" in f.metadata:
        return PARSERS[f.metadata["parse"]]
    if kind is int:
        return {1: positive_int, 0: non_negative_int}.get(f.metadata.get("min"), int)
    return {float: finite_float, Path: Path}.get(kind)


def config_values(given: dict[str, Any]) -> dict[str, Any]:
    """``given`` (parsed flags and config-file values) as field values: a boolean ``pair``'s flags
    joined into its field (both given: an error), a ``choices`` word turned into its value."""
    given = dict(given)
    for f in fields(TrainConfig):
        pair = f.metadata.get("pair")
        if pair:
            chosen = {flag: given.pop(flag) for flag in pair if flag in given}
            if len(set(chosen.values())) > 1:
                raise TrainingError(f"{' and '.join(chosen)} contradict each other; give one")
            if chosen:
                given[f.name] = next(iter(chosen.values()))
        words = f.metadata.get("choices")
        if words and isinstance(given.get(f.name), str):
            if given[f.name] not in words:
                flag = flag_name(TrainConfig, f.name)
                raise TrainingError(f"{flag} must be one of {', '.join(words)}, not {given[f.name]!r}")
            given[f.name] = words[given[f.name]]
    return given
