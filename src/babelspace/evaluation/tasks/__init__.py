"""Evaluation tasks, one module each (construction of the task data and its scoring), described by
:class:`~babelspace.evaluation.tasks.spec.TaskSpec` metadata and listed once in
:data:`~babelspace.evaluation.tasks.registry.TASKS`."""
