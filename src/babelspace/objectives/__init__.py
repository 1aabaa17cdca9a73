"""Training objectives, one module per objective class (``*Objective``), and the one registry of their
names and the one parser of an ``--objective`` spec.

============== =============================================== ======================================
name           class                                           paper
============== =============================================== ======================================
``distill``    :class:`~.distillation.DistillationObjective`   Reimers & Gurevych 2020
``mexma``      :class:`~.mexma.MexmaObjective`                 Janeiro et al. 2025
``contrastive`` :class:`~.contrastive.ContrastiveObjective`    Feng et al. 2022 (LaBSE)
``bottleneck`` :class:`~.bottleneck.BottleneckObjective`       Artetxe & Schwenk 2019 (LASER), SONAR
============== =============================================== ======================================

Names are case-insensitive (``Mexma`` is ``mexma``); a ``+``-joined spec composes several
(:class:`~.composite.CompositeObjective`). The registry names classes by import path so that reading
it (as :class:`~babelspace.training.config.TrainConfig` does at construction) loads no model code.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from babelspace.objectives.base import Objective

__all__ = ["OBJECTIVES", "OBJECTIVE_NAMES", "objective_class", "parse_objective_spec"]

#: name -> "module:Class" of every objective; each class's ``name`` attribute equals its key.
OBJECTIVES: dict[str, str] = {
    "distill": "babelspace.objectives.distillation:DistillationObjective",
    "mexma": "babelspace.objectives.mexma:MexmaObjective",
    "contrastive": "babelspace.objectives.contrastive:ContrastiveObjective",
    "bottleneck": "babelspace.objectives.bottleneck:BottleneckObjective",
}
#: Names accepted in an objective spec.
OBJECTIVE_NAMES = tuple(OBJECTIVES)


def objective_class(name: str) -> type[Objective]:
    """The class registered under ``name`` (imported on first use)."""
    module, cls = OBJECTIVES[name].split(":")
    return getattr(importlib.import_module(module), cls)


def parse_objective_spec(spec: str, weights: str | Sequence[float] | None = None) -> list[tuple[str, float]]:
    """``"mexma+distill"``, ``"1,0.5"`` -> ``[("mexma", 1.0), ("distill", 0.5)]``.

    Weights default to 1 each. Raises ValueError on unknown or repeated names, a weight count that
    does not match, or a weight that is not a finite number >= 0."""
    names = [s.strip().lower() for s in spec.split("+")]
    if not spec.strip() or any(not s for s in names):
        raise ValueError(f"empty objective name in {spec!r}; write e.g. 'mexma' or 'mexma+distill'")
    unknown = [s for s in names if s not in OBJECTIVE_NAMES]
    if unknown:
        raise ValueError(
            f"unknown objective(s) {unknown} in {spec!r}; choose from {', '.join(OBJECTIVE_NAMES)}"
        )
    if len(set(names)) != len(names):
        raise ValueError(f"objective named twice in {spec!r}")
    if weights is None or (isinstance(weights, str) and not weights.strip()):
        values = [1.0] * len(names)
    else:
        parts = weights.split(",") if isinstance(weights, str) else list(weights)
        try:
            values = [float(w) for w in parts]
        except ValueError as exc:
            raise ValueError(f"objective weights must be numbers, got {weights!r}") from exc
        if len(values) != len(names):
            raise ValueError(
                f"{len(names)} objective(s) in {spec!r} but {len(values)} weight(s) in {weights!r}"
            )
    if any(not (w >= 0 and w != float("inf")) for w in values):
        raise ValueError(f"objective weights must be finite and >= 0, got {values}")
    return list(zip(names, values, strict=True))
