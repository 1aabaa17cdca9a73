"""The one map from task name to task: the runner's dispatch and the table columns are derived from
:data:`TASKS`; the names and their order are :data:`~babelspace.evaluation.tasks.names.ALL_TASKS`."""

from __future__ import annotations

from babelspace.evaluation.tasks import bias, bucc, geometry, mse, sts, tatoeba, xsim, xsimpp
from babelspace.evaluation.tasks.names import ALL_TASKS
from babelspace.evaluation.tasks.spec import TaskSpec

__all__ = ["TASKS"]

_MODULES = {m.SPEC.name: m.SPEC for m in (xsim, xsimpp, tatoeba, bucc, sts, mse, geometry, bias)}
if set(_MODULES) != set(ALL_TASKS):  # a task module added without its name, or the reverse
    raise ImportError(f"task modules {sorted(_MODULES)} do not match task names {list(ALL_TASKS)}")

#: Every task by name, in the order ``--task all`` runs them.
TASKS: dict[str, TaskSpec] = {name: _MODULES[name] for name in ALL_TASKS}
