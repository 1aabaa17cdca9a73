"""Task names in run order, their aliases, and ``--task`` parsing: what a configuration needs to know
of the tasks without importing them (the registry, :mod:`babelspace.evaluation.tasks.registry`, maps
each name to its task module's :class:`~babelspace.evaluation.tasks.spec.TaskSpec`)."""

from __future__ import annotations

from collections.abc import Iterable

from babelspace.errors import BabelspaceError

__all__ = ["ALL_TASKS", "parse_tasks"]

#: Every task, in the order ``--task all`` runs them.
ALL_TASKS: tuple[str, ...] = ("xsim", "xsimpp", "tatoeba", "bucc", "sts", "mse", "geometry", "bias")

_ALIASES = {"xsim++": "xsimpp", "xsim_pp": "xsimpp", "language-bias": "bias", "language_bias": "bias"}


def parse_tasks(value: str | Iterable[str]) -> list[str]:
    """``"xsim,tatoeba"`` / ``"all"`` / a list of names -> canonical task names, in run order.

    Unknown names raise :class:`BabelspaceError` naming them and the valid choices.
    """
    items = value.split(",") if isinstance(value, str) else list(value)
    names = [x.strip().lower() for x in items if x and x.strip()]
    if not names:
        raise BabelspaceError(f"no task given; choose from {', '.join(ALL_TASKS)} or 'all'")
    if "all" in names:
        return list(ALL_TASKS)
    names = [_ALIASES.get(n, n) for n in names]
    unknown = [n for n in names if n not in ALL_TASKS]
    if unknown:
        raise BabelspaceError(
            f"unknown task(s) {', '.join(repr(u) for u in unknown)}; choose from {', '.join(ALL_TASKS)} or 'all'"
        )
    wanted = set(names)
    return [t for t in ALL_TASKS if t in wanted]
