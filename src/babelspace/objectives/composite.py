"""Weighted sum of objectives that train one shared student (e.g. MEXMA + distillation).

Not from a paper: a convenience for combining the objectives of this package. Every
sub-objective sees the same pairs; the total is Σ_k w_k · L_k and each sub-objective's components
are logged under its name (``"mexma/ce"``, ``"distill/loss"``).

=================  ==========================================================
Inputs             parallel pairs; each sub-objective collates them its own way
Outputs            ``loss`` (weighted sum) and ``"<name>/<component>"`` for every
                   component of every sub-objective (``"<name>/loss"`` unweighted)
=================  ==========================================================

Example::

    spec = babelspace.objectives.parse_objective_spec("mexma+distill", weights="1,0.5")
    objective = CompositeObjective({"mexma": mexma, "distill": distill}, dict(spec))
    out = objective(objective.collate(pairs)); out["loss"].backward()
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from babelspace.data.pairs import ParallelPair
from babelspace.objectives.base import Objective

__all__ = ["CompositeObjective"]


class CompositeObjective(Objective):
    """Σ_k w_k · L_k over sub-objectives sharing one student (the same object)."""

    name = "composite"

    def __init__(
        self,
        objectives: Mapping[str, Objective] | Sequence[Objective],
        weights: Mapping[str, float] | Sequence[float] | None = None,
    ) -> None:
        if not isinstance(objectives, Mapping):
            objectives = {o.name: o for o in objectives}
        if not objectives:
            raise ValueError("a composite objective needs at least one objective")
        first = next(iter(objectives.values()))
        super().__init__(first.student, first.max_seq_length)
        for name, obj in objectives.items():
            if obj.student is not first.student:
                raise ValueError(f"objective {name!r} trains a different student; all must share one")
            if "/" in name:
                raise ValueError(f"objective name {name!r} must not contain '/'")
        self.objectives = torch.nn.ModuleDict(dict(objectives))
        if weights is None:
            w = dict.fromkeys(objectives, 1.0)
        elif isinstance(weights, Mapping):
            w = {k: float(weights.get(k, 1.0)) for k in objectives}
            extra = set(weights) - set(objectives)
            if extra:
                raise ValueError(f"weights given for unknown objectives {sorted(extra)}")
        else:
            if len(weights) != len(objectives):
                raise ValueError(f"{len(objectives)} objectives but {len(weights)} weights")
            w = dict(zip(objectives, map(float, weights), strict=True))
        self.weights = w

    @property
    def collate_in_workers(self) -> bool:  # type: ignore[override]
        return all(obj.collate_in_workers for obj in self.objectives.values())

    def collate(self, pairs: Sequence[ParallelPair]) -> dict[str, Any]:
        return {name: obj.collate(pairs) for name, obj in self.objectives.items()}

    def begin_step(self, step: int) -> None:
        for obj in self.objectives.values():
            obj.begin_step(step)

    def forward(self, batch: dict[str, Any]) -> dict[str, torch.Tensor]:
        total: torch.Tensor | None = None
        logs: dict[str, torch.Tensor] = {}
        for name, obj in self.objectives.items():
            out = obj(batch[name])
            weighted = self.weights[name] * out["loss"]
            total = weighted if total is None else total + weighted
            for key, value in out.items():
                logs[f"{name}/{key}"] = value.detach()
        assert total is not None
        return {"loss": total, **logs}

    def head_state(self) -> dict[str, Any]:
        """Every sub-objective's head state, keyed as in this module's ``state_dict``."""
        return {
            f"objectives.{name}.{k}": v
            for name, obj in self.objectives.items()
            for k, v in obj.head_state().items()
        }

    def load_head_state(self, state: dict[str, Any]) -> None:
        for name, obj in self.objectives.items():
            prefix = f"objectives.{name}."
            sub = {k[len(prefix) :]: v for k, v in state.items() if k.startswith(prefix)}
            loader = getattr(obj, "load_head_state", None)
            if loader is not None:
                loader(sub)
            elif sub:
                obj.load_state_dict(sub, strict=False)
