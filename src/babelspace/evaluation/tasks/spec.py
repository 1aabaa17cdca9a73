"""Task metadata (MTEB-style): what a task measures and with which metric, kept apart from its scoring.

Each module of :mod:`babelspace.evaluation.tasks` defines one :class:`TaskSpec` (``SPEC``) whose ``run``
function builds the task's data and scores it; the runner (:mod:`babelspace.evaluation.runner`) only
loops over the requested specs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from babelspace.evaluation.cache import EmbeddingCache
    from babelspace.evaluation.config import EvalConfig
    from babelspace.evaluation.data import EvalData, LangPairs
    from babelspace.evaluation.results import TaskResult

__all__ = ["TaskContext", "TaskSpec"]


class TaskContext(Protocol):
    """What a task's ``run`` gets from the runner: the config, the lazily loaded resources, and a memo
    shared by the tasks of one run (e.g. STS sets read once for ``sts`` and ``bias``)."""

    cfg: EvalConfig
    memo: dict[str, Any]

    @property
    def cache(self) -> EmbeddingCache: ...

    @property
    def teacher_cache(self) -> EmbeddingCache: ...

    @property
    def data(self) -> EvalData: ...

    def encode_groups(self, groups: list[LangPairs]) -> None: ...

    def base_config(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class TaskSpec:
    """One evaluation task.

    ``metric`` names the main figure, ``unit`` its unit, ``higher_is_better`` its direction (plots),
    ``column`` the header of the task's column in the table; ``run`` computes the task's
    :class:`~babelspace.evaluation.results.TaskResult`. The data, protocol and paper of each task are in
    its module's docstring.
    """

    name: str
    description: str
    metric: str
    unit: str
    higher_is_better: bool
    column: str
    run: Callable[[TaskContext], TaskResult]
