"""How a config dataclass's fields describe their command-line flag (``TrainConfig``, ``EvalConfig``,
``MiningConfig``, ``ScoreConfig``, ``AlignConfig``): :func:`option` puts a field's help, group and flag
details in its ``dataclasses`` metadata, and the readers below give what the parser
(``cli/config_flags.py``) and each config's validation both need: each field's flag name, its choices
(the values of its ``Literal`` annotation) and its lower bound. Nothing here imports a config, so every
layer can use it."""

from __future__ import annotations

import functools
import types
import typing
from dataclasses import MISSING, Field, field, fields
from typing import Any, Literal, get_args, get_origin


def option(default: Any, help: str = "", group: str = "", **cli: Any) -> Any:
    """A config field that is a command-line flag, shown under ``group`` in ``--help``.

    ``cli`` may hold ``flag`` (the flag when it is not ``--field-name``; ``positional``: an argument
    without a flag), ``metavar``, ``default_factory`` (for a list default), ``min``/``above`` (the
    lowest value allowed, included or not: checked by the config, and an integer's flag then parses
    a whole number >= ``min``), ``parse`` (a named argument type of the parser), ``nargs``, ``shown``
    (the default as ``--help`` says it; a ``None`` default needs it unless the help says what no value
    means), ``exclusive`` (a key: the fields that share it exclude each
    other), ``negatable`` (a boolean as ``--x``/``--no-x``), ``choices`` (a mapping of the flag's
    words to the field's values) and ``pair`` (a boolean set by two flags: ``{flag: (value, help)}``)."""
    factory = cli.pop("default_factory", None)
    if factory is not None:
        return field(default_factory=factory, metadata={"help": help, "group": group, **cli})
    return field(default=default, metadata={"help": help, "group": group, **cli})


def is_flag(f: Field) -> bool:
    return bool(f.metadata.get("group"))


def flag_name(cls: type, name: str) -> str:
    """``--name`` of field ``name`` on the command line (``--out`` for ``output``; a positional
    argument's metavar, e.g. ``MODEL``)."""
    meta = _fields(cls)[name].metadata
    if meta.get("positional"):
        return meta.get("metavar", name.upper())
    return meta.get("flag", "--" + name.replace("_", "-"))


def field_default(f: Field) -> Any:
    """The value a field gets when it is not given (its ``default_factory`` called)."""
    if f.default_factory is not MISSING:  # type: ignore[misc]
        return f.default_factory()  # type: ignore[misc]
    return None if f.default is MISSING else f.default


@functools.cache
def _fields(cls: type) -> dict[str, Field]:
    return {f.name: f for f in fields(cls)}


@functools.cache
def field_types(cls: type) -> dict[str, tuple[Any, ...]]:
    """Each field's annotation as the tuple of its union's members (``int | None`` -> ``(int, NoneType)``)."""
    out = {}
    for name, hint in typing.get_type_hints(cls).items():
        union = get_origin(hint) in (typing.Union, types.UnionType)
        out[name] = get_args(hint) if union else (hint,)
    return out


@functools.cache
def literal_choices(cls: type) -> dict[str, tuple[Any, ...]]:
    """The allowed values of every field annotated with a ``Literal`` (or a ``Literal`` or ``None``):
    what the config checks and the flag's ``choices``."""
    out = {}
    for name, members in field_types(cls).items():
        literals = [m for m in members if get_origin(m) is Literal]
        others = [m for m in members if get_origin(m) is not Literal and m is not type(None)]
        if literals and not others:
            out[name] = tuple(v for lit in literals for v in get_args(lit))
    return out


def base_type(cls: type, name: str) -> Any:
    """The field's type without ``None`` (``int | None`` -> ``int``; a ``Literal`` -> ``str``)."""
    if name in literal_choices(cls):
        return str
    members = [m for m in field_types(cls)[name] if m is not type(None)]
    return get_origin(members[0]) or members[0]
