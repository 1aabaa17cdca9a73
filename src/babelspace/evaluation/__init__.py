"""Evaluation of an encoder: tasks (one :class:`~babelspace.evaluation.tasks.spec.TaskSpec` module each),
their file formats (:mod:`~babelspace.evaluation.formats`), the runner, reports and plots, and the checks that
training runs (dev score, held-out table). The arithmetic lives in :mod:`babelspace.metrics` and
:mod:`babelspace.retrieval`."""
