"""How a command declares its flags from its config dataclass: one flag per field made with
:func:`~babelspace.config_fields.option` (``TrainConfig``, ``EvalConfig``, ``MiningConfig``,
``ScoreConfig``, ``AlignConfig``), in field order under the field's group, read from the field's
metadata and type; :func:`opt` for the few flags that are not fields; and the two-level help
(``--help``: the essentials, ``--help-all``: everything). Every flag's absence leaves the config's
value (its argparse default is ``SUPPRESS``, so a preset or a config file can fill it); its help
shows the config default once, in words."""

from __future__ import annotations

import argparse
import sys
from dataclasses import Field, fields
from pathlib import Path
from typing import Any

from babelspace.cli.argtypes import comma_list, finite_float, non_negative_int, open_fraction, positive_int
from babelspace.config_fields import base_type, field_default, flag_name, is_flag, literal_choices
from babelspace.errors import BabelspaceError


def batch_size_arg(value: str) -> int | str:
    """``--batch-size``: a whole number >= 1, or ``auto``."""
    return "auto" if value == "auto" else positive_int(value)


def memory_size(value: str) -> int:
    """``--max-memory``: a size such as ``4GB`` or ``512MB``, in bytes."""
    from babelspace.mining.memory import parse_memory

    try:
        return parse_memory(value)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _threshold(value: str) -> float | str:
    if value == "auto":
        return value
    try:
        number = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number or 'auto', not {value!r}") from None
    if number != number:
        raise argparse.ArgumentTypeError("expected a number or 'auto', not nan")
    return number


def _tasks(value: str) -> list[str]:
    from babelspace.evaluation.tasks.names import parse_tasks

    try:
        return parse_tasks(value)
    except BabelspaceError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _paths(value: str) -> list[Path]:
    return [Path(p) for p in value.split(",") if p]


def _ratio(value: str) -> float:
    x = finite_float(value)
    if x < 1:
        raise argparse.ArgumentTypeError(f"expected a ratio >= 1, got {value}")
    return x


#: Argument types a field names with ``parse=``.
PARSERS = {
    "batch_size": batch_size_arg,
    "comma_list": comma_list,
    "fraction": open_fraction,
    "memory": memory_size,
    "paths": _paths,
    "ratio": _ratio,
    "tasks": _tasks,
    "threshold": _threshold,
}


def _show(value: Any) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, (list, tuple)):
        return " ".join(map(str, value))
    return str(getattr(value, "value", value))  # an Enum by its value


def _with_default(help: str, shown: str | None) -> str:
    """``help`` and its default once: nothing added when the help already says it ("default: ...",
    or "unset: ..." for what happens when the flag is left out)."""
    if shown is None or "default:" in help or "unset:" in help:
        return help
    return f"{help} (default: {shown})"


def opt(group, flag: str, help: str = "", default_text: str | None = None, **kwargs: Any) -> None:  # noqa: ANN001
    """A flag that is not built from a field's metadata, with the same rules: its absence leaves the
    preset's (or the config's) value, and ``--help`` shows ``default_text``."""
    quiet = kwargs.get("action") in {"store_true", "store_false"}
    group.add_argument(
        flag, default=argparse.SUPPRESS, help=help if quiet else _with_default(help, default_text), **kwargs
    )


class ConfigFlags:
    """The flags of config class ``cls``; :meth:`add` puts one field's flag in a group, :meth:`add_all`
    every flag field not added yet (each under its own group, created in field order)."""

    def __init__(self, cls: type) -> None:
        self.cls = cls
        self.fields = {f.name: f for f in fields(cls) if is_flag(f)}
        self.added: set[str] = set()
        self._exclusive: dict[str, argparse._MutuallyExclusiveGroup] = {}

    def add(self, group: argparse._ArgumentGroup | argparse.ArgumentParser, name: str) -> None:
        f = self.fields[name]
        key = f.metadata.get("exclusive")
        if key is not None and key not in self._exclusive:
            self._exclusive[key] = group.add_mutually_exclusive_group()
        target = self._exclusive[key] if key is not None else group
        for flag, kwargs in self._arguments(f):
            if f.metadata.get("positional"):
                target.add_argument(kwargs.pop("dest"), **kwargs)
            else:
                target.add_argument(flag, default=argparse.SUPPRESS, **kwargs)
        self.added.add(name)

    def add_all(self, p: argparse.ArgumentParser, groups: dict[str, Any] | None = None) -> None:
        """Every flag field not added yet; a group not in ``groups`` (by title) is added to ``p`` where
        its first field comes, so the groups appear in field order after those given."""
        groups = {} if groups is None else groups
        for name, f in self.fields.items():
            if name in self.added:
                continue
            title = f.metadata["group"]
            if title not in groups:
                groups[title] = p if f.metadata.get("positional") else p.add_argument_group(title)
            self.add(groups[title], name)

    def _arguments(self, f: Field) -> list[tuple[str, dict[str, Any]]]:
        """``[(flag, add_argument keyword arguments), ...]`` of field ``f`` (two for a ``pair``)."""
        meta, default = f.metadata, field_default(f)
        if "pair" in meta:  # each flag stores its value under its own name; values() joins them
            return [
                (flag, {"action": "store_const", "const": value, "dest": flag, "help": text})
                for flag, (value, text) in meta["pair"].items()
            ]
        flag = flag_name(self.cls, f.name)
        kind = base_type(self.cls, f.name)
        kwargs: dict[str, Any] = {"dest": f.name}
        if "metavar" in meta:
            kwargs["metavar"] = meta["metavar"]
        if kind is bool and "choices" not in meta:
            if not meta.get("negatable"):
                return [(flag, {**kwargs, "action": "store_true", "help": meta["help"]})]
            kwargs["action"] = argparse.BooleanOptionalAction
        elif "choices" in meta:
            kwargs["choices"] = list(meta["choices"])
            default = next(word for word, value in meta["choices"].items() if value == default)
        elif f.name in literal_choices(self.cls):
            kwargs["choices"] = list(literal_choices(self.cls)[f.name])
        else:
            kwargs["type"] = self._value_type(f, kind)
        if "nargs" in meta:
            kwargs["nargs"] = meta["nargs"]
        return [(flag, {**kwargs, "help": self._help(f, default)})]

    def _help(self, f: Field, default: Any) -> str:
        """The field's help and its default, once; a field whose default is no value says what that
        means (``shown``, or its help's own words: "unset: ...", "default: ...")."""
        meta = f.metadata
        if meta.get("positional"):
            return meta["help"]
        if "shown" in meta:
            return _with_default(meta["help"], meta["shown"])
        if default is None or default == []:
            if "unset" in meta["help"] or "default" in meta["help"]:
                return meta["help"]
            raise ValueError(
                f"{self.cls.__name__}.{f.name}: a None default needs shown= or 'unset:' in its help"
            )
        return _with_default(meta["help"], _show(default))

    @staticmethod
    def _value_type(f: Field, kind: type) -> Any:
        """The argparse ``type`` of a field's value: a named parser, a whole number within the
        field's ``min`` (1 or 0), a finite float, a path, or the text as it is."""
        if "parse" in f.metadata:
            return PARSERS[f.metadata["parse"]]
        if kind is int:
            return {1: positive_int, 0: non_negative_int}.get(f.metadata.get("min"), int)
        return {float: finite_float, Path: Path}.get(kind)

    def values(self, given: dict[str, Any], error: type[Exception] = BabelspaceError) -> dict[str, Any]:
        """``given`` (parsed flags and config-file values) as field values: a boolean ``pair``'s flags
        joined into its field (both given: an error), a ``choices`` word turned into its value; keys
        that are not fields of the config are left out."""
        given = dict(given)
        for f in fields(self.cls):
            pair = f.metadata.get("pair")
            if pair:
                chosen = {flag: given.pop(flag) for flag in pair if flag in given}
                if len(set(chosen.values())) > 1:
                    raise error(f"{' and '.join(chosen)} contradict each other; give one")
                if chosen:
                    given[f.name] = next(iter(chosen.values()))
            words = f.metadata.get("choices")
            if words and isinstance(given.get(f.name), str):
                if given[f.name] not in words:
                    flag = flag_name(self.cls, f.name)
                    raise error(f"{flag} must be one of {', '.join(words)}, not {given[f.name]!r}")
                given[f.name] = words[given[f.name]]
        return given


def config_kwargs(cls: type, args: argparse.Namespace) -> dict[str, Any]:
    """The flag fields of ``cls`` that the command line gave (absent flags left out: the config's
    defaults apply; fields set by shared flags, such as ``--margin``, are the caller's to pass)."""
    flags = ConfigFlags(cls)
    return {k: v for k, v in flags.values(vars(args)).items() if k in flags.fields}


class DefaultsFormatter(argparse.HelpFormatter):
    """For parsers not built from a config: each flag's default shown once, in words: nothing added
    when the help already says it ("default:", "unset:"), and nothing for a flag whose default is no
    value (None, an empty list, off), which the help says in words where it matters."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        if default in (None, False, [], argparse.SUPPRESS) or not action.option_strings:
            return text
        return _with_default(text, _show(default))


# ----------------------------------------------------------------------------- two-level help
class _HelpAction(argparse.Action):
    """``-h/--help``: the groups named ``essential`` only, and one line naming the others;
    ``--help-all``: every group."""

    def __init__(self, option_strings, dest, everything: bool, essential: tuple[str, ...], help: str):  # noqa: ANN001
        super().__init__(
            option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, nargs=0, help=help
        )
        self.everything, self.essential = everything, essential

    def __call__(self, parser, namespace, values, option_string=None) -> None:  # noqa: ANN001
        parser._print_message(format_help(parser, None if self.everything else self.essential), sys.stdout)
        parser.exit()


def add_two_level_help(p: argparse.ArgumentParser, essential: tuple[str, ...]) -> None:
    """``-h/--help`` (the groups titled in ``essential``) and ``--help-all`` (all) on a parser made
    with ``add_help=False``."""
    p.add_argument("-h", "--help", action=_HelpAction, everything=False, essential=essential,
                   help="show the essential options and exit")  # fmt: skip
    p.add_argument("--help-all", action=_HelpAction, everything=True, essential=essential,
                   help="show every option and exit")  # fmt: skip


def format_help(parser: argparse.ArgumentParser, groups: tuple[str, ...] | None) -> str:
    """argparse's help of ``parser`` with only the groups titled in ``groups`` (None: every group),
    and a line naming each group left out with its number of options."""
    formatter = parser._get_formatter()
    formatter.add_usage(parser.usage, parser._actions, parser._mutually_exclusive_groups)
    formatter.add_text(parser.description)
    hidden = []
    for group in parser._action_groups:
        if groups is None or group.title in groups or group.title == "options":
            formatter.start_section(group.title)
            formatter.add_text(group.description)
            formatter.add_arguments(group._group_actions)
            formatter.end_section()
        elif group._group_actions:
            hidden.append(f"{group.title} ({len(group._group_actions)})")
    if hidden:
        formatter.add_text(f"{len(hidden)} more groups of options, shown by --help-all: " + "; ".join(hidden))
    formatter.add_text(parser.epilog)
    return formatter.format_help()
