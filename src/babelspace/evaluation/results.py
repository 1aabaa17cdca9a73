"""What an evaluation run returns: one :class:`TaskResult` per task, gathered in an :class:`EvalReport`."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["EvalReport", "TaskResult"]


@dataclass
class TaskResult:
    """One task's figures. ``per_language`` maps a row label (language, or STS set) to its figures;
    ``average`` holds the combined figures (micro-average for error rates, mean otherwise)."""

    task: str
    status: str = "ok"
    reason: str | None = None
    metric: str = ""
    unit: str = ""
    config: dict[str, Any] = field(default_factory=dict)
    per_language: dict[str, dict[str, Any]] = field(default_factory=dict)
    average: dict[str, Any] = field(default_factory=dict)
    n_sentences: int = 0
    wall_time_s: float = 0.0
    encode_time_s: float = 0.0
    notes: list[str] = field(default_factory=list)

    def main_values(self) -> dict[str, float]:
        """``{row: main metric}`` for the rows that have it."""
        return {
            row: float(v[self.metric])
            for row, v in self.per_language.items()
            if v.get(self.metric) is not None and row != "en"
        }

    def skip(self, reason: str) -> TaskResult:
        """Mark the task skipped with ``reason``; returns itself."""
        self.status, self.reason = "skipped", reason
        return self


@dataclass
class EvalReport:
    model: str
    config: dict[str, Any]
    data: dict[str, Any]
    tasks: dict[str, TaskResult]
    encoding: dict[str, Any]
    wall_time_s: float
    plots: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
