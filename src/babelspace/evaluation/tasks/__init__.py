"""Evaluation tasks, one module each (construction of the task's data and its scoring), described by
:class:`~babelspace.evaluation.tasks.spec.TaskSpec` metadata and listed once in
:data:`~babelspace.evaluation.tasks.registry.TASKS`.
"""

from babelspace.evaluation.tasks.registry import ALL_TASKS, TASKS, parse_tasks
from babelspace.evaluation.tasks.spec import TaskContext, TaskSpec
from babelspace.evaluation.tasks.tatoeba import TATOEBA_CODES, tatoeba_code, two_letter

__all__ = [
    "ALL_TASKS",
    "TASKS",
    "TATOEBA_CODES",
    "TaskContext",
    "TaskSpec",
    "parse_tasks",
    "tatoeba_code",
    "two_letter",
]
