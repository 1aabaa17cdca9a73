"""Run evaluation tasks on one model: one generic loop over the requested tasks' metadata.

This is the engine of ``babelspace eval`` (:mod:`babelspace.cli.eval` only parses arguments and
prints). Each task (:mod:`babelspace.evaluation.tasks`) builds its data and scores it through the
runner, which lends it the lazily loaded resources: the model's :class:`EmbeddingCache` (each distinct
text encoded once per run: the English pool shared by all languages and tasks is encoded once), the
teacher's cache, and the default evaluation pairs (:mod:`babelspace.evaluation.data`). Every neighbour
search goes through the chunked functions of :mod:`babelspace.retrieval.knn`. It logs progress with
:mod:`logging`; it never prints.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from babelspace.evaluation.cache import EmbeddingCache
from babelspace.evaluation.config import EvalConfig
from babelspace.evaluation.data import EvalData, LangPairs, load_eval_data
from babelspace.evaluation.results import EvalReport, TaskResult
from babelspace.evaluation.tasks.registry import TASKS

logger = logging.getLogger(__name__)

__all__ = ["EvalRunner", "run_eval"]


class EvalRunner:
    """Runs the configured tasks on one model. ``run()`` returns an :class:`EvalReport`.

    The runner is the :class:`~babelspace.evaluation.tasks.spec.TaskContext` of every task; ``cfg`` is
    a validated copy of the config it was given (which is left as it is).
    """

    def __init__(self, cfg: EvalConfig, model: Any | None = None) -> None:
        self.cfg = cfg.validate()
        self.memo: dict[str, Any] = {}
        self._model = model
        self._cache: EmbeddingCache | None = None
        self._teacher_cache: EmbeddingCache | None = None
        self._data: EvalData | None = None

    # ---- lazily loaded resources
    @property
    def cache(self) -> EmbeddingCache:
        if self._cache is None:
            if self._model is None:
                from babelspace.models.backends import load_backend_encoder

                cfg = self.cfg
                logger.info("loading model %s (%s, %s)", cfg.model, cfg.backend, cfg.quantize)
                self._model = load_backend_encoder(
                    cfg.model, cfg.backend, cfg.quantize, device=cfg.device, max_seq_length=cfg.max_seq_length
                )
            self._cache = EmbeddingCache(
                self._model, self.cfg.model, batch_size=self.cfg.batch_size, progress=self.cfg.progress
            )
        return self._cache

    @property
    def teacher_cache(self) -> EmbeddingCache:
        if self._teacher_cache is None:
            if self.cfg.teacher == self.cfg.model:
                self._teacher_cache = self.cache
            else:
                from babelspace.models.encoder import load_encoder

                cfg = self.cfg
                logger.info("loading teacher %s", cfg.teacher)
                teacher = load_encoder(cfg.teacher, device=cfg.device, max_seq_length=cfg.max_seq_length)
                self._teacher_cache = EmbeddingCache(
                    teacher, cfg.teacher, batch_size=cfg.batch_size, progress=cfg.progress
                )
        return self._teacher_cache

    @property
    def data(self) -> EvalData:
        if self._data is None:
            self._data = load_eval_data(self.cfg)
            logger.info("evaluation data: %s", self._data.description)
        return self._data

    def encode_groups(self, groups: Sequence[LangPairs]) -> None:
        """Encode every text of ``groups`` in one call (so one progress bar and full batches)."""
        self.cache.encode([t for g in groups for t in (*g.en, *g.xx)])

    def base_config(self) -> dict[str, Any]:
        return {"model": self.cfg.model, "margin": self.cfg.margin, "k": self.cfg.k}

    # ---- the loop
    def run(self) -> EvalReport:
        t_start = time.perf_counter()
        results: dict[str, TaskResult] = {}
        for name in self.cfg.tasks:
            spec = TASKS[name]
            t0, enc0 = time.perf_counter(), self._encode_seconds()
            logger.info("task %s: %s", name, spec.description)
            r = spec.run(self)
            r.metric, r.unit = spec.metric, spec.unit
            r.wall_time_s = round(time.perf_counter() - t0, 3)
            r.encode_time_s = round(self._encode_seconds() - enc0, 3)
            results[name] = r
            if r.status == "skipped":
                logger.warning("task %s skipped: %s", name, r.reason)
        plots: list[str] = []
        if self.cfg.plots_dir:
            from babelspace.evaluation.run_plots import write_run_plots

            plots = write_run_plots(self, results, Path(self.cfg.plots_dir))
        return EvalReport(
            model=self.cfg.model,
            config=asdict(self.cfg),
            data=self._data.info() if self._data is not None else {},
            tasks=results,
            encoding=self._encoding_stats(),
            wall_time_s=round(time.perf_counter() - t_start, 3),
            plots=plots,
        )

    def _own_teacher(self) -> EmbeddingCache | None:
        """The teacher's cache when it is a model of its own (not the student's cache)."""
        t = self._teacher_cache
        return t if t is not None and t is not self._cache else None

    def _encoding_stats(self) -> dict[str, Any]:
        encoding: dict[str, Any] = {"student": self._cache.stats() if self._cache else None}
        if (teacher := self._own_teacher()) is not None:
            encoding["teacher"] = teacher.stats()
        return encoding

    def _encode_seconds(self) -> float:
        s = self._cache.seconds if self._cache else 0.0
        if (teacher := self._own_teacher()) is not None:
            s += teacher.seconds
        return s


def run_eval(cfg: EvalConfig, model: Any | None = None) -> EvalReport:
    """Run ``cfg.tasks`` on ``cfg.model`` (or on an already loaded ``model``)."""
    return EvalRunner(cfg, model).run()
