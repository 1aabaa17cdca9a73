"""Sharded training (FSDP through ``accelerate``): what babelspace's loop needs around it.

Launched with an ``accelerate`` FSDP config (docs/training.md, "Big encoders: FSDP"), accelerate
shards the objective — the student and any head — across processes: each rank keeps a slice of
every parameter, its gradient and its optimizer state, and gathers the full weights layer by layer
inside forward and backward. That is what lets MEXMA train an encoder that does not fit one GPU
(Janeiro et al. 2025 train XLM-R large and a 1.3B NLLB encoder). Three parts of the loop need the
*full* weights outside forward, and get them here:

* **dev evaluation and export** run on the main process on :class:`FullStudent`, an ordinary
  (unsharded) copy of the student refreshed from the shards before each use: every rank takes part
  in the gather, the main process alone evaluates and writes;
* **checkpoints** hold the full model and optimizer state (:func:`full_training_state`, gathered
  to the main process) so a checkpoint does not depend on the number of processes that wrote it,
  and :func:`load_full_training_state` scatters it back on resume.

Both use ``torch.distributed.checkpoint.state_dict``, which serves FSDP1 and FSDP2 alike.
DeepSpeed is not supported (:func:`check_sharding` says so).
"""

from __future__ import annotations

import copy
from typing import Any

import torch

from babelspace.errors import TrainingError


def sharding_kind(accelerator: Any) -> str | None:
    """``"FSDP"`` or ``"DEEPSPEED"`` when accelerate shards the model, else ``None``."""
    kind = str(accelerator.distributed_type).upper()
    for name in ("FSDP", "DEEPSPEED"):
        if name in kind:
            return name
    return None


def check_sharding(accelerator: Any) -> bool:
    """True under FSDP; a clear error under DeepSpeed (not supported: use the FSDP config)."""
    kind = sharding_kind(accelerator)
    if kind == "DEEPSPEED":
        raise TrainingError(
            "accelerate is configured for DeepSpeed, which babelspace does not support; shard a big student "
            "with FSDP instead (accelerate launch --config_file configs/fsdp.yaml ..., docs/training.md)"
        )
    return kind == "FSDP"


def _options(**kwargs: bool):
    from torch.distributed.checkpoint.state_dict import StateDictOptions

    return StateDictOptions(full_state_dict=True, cpu_offload=True, **kwargs)


def module_prefix(root: torch.nn.Module, part: torch.nn.Module) -> str:
    """The state-dict prefix of ``part`` inside ``root`` (``"student."``); ``""`` when it is root."""
    for name, module in root.named_modules():
        if module is part:
            return f"{name}." if name else ""
    raise ValueError("the student is not part of the objective")


class FullStudent:
    """An unsharded copy of the student on the main process, refreshed from the sharded objective.

    Build it *before* ``accelerator.prepare`` (the student is still whole then); call
    :meth:`refresh` on every rank (it gathers) and use what it returns on the main process only.
    """

    def __init__(self, objective: torch.nn.Module, student: torch.nn.Module, is_main: bool) -> None:
        self.prefix = module_prefix(objective, student)
        self.student = copy.deepcopy(student) if is_main else None

    def refresh(self, model: torch.nn.Module) -> Any:
        """Gather the full weights (collective) and load the student's into the copy (main process)."""
        from torch.distributed.checkpoint.state_dict import get_model_state_dict

        full = get_model_state_dict(model, options=_options())
        if self.student is None:
            return None
        own = {k[len(self.prefix) :]: v for k, v in full.items() if k.startswith(self.prefix)}
        missing, unexpected = self.student.load_state_dict(own, strict=False)
        if missing or unexpected:
            raise TrainingError(f"sharded student state does not match the student: missing {missing[:5]}")
        return self.student


def _inner(optimizer: torch.optim.Optimizer) -> torch.optim.Optimizer:
    return getattr(optimizer, "optimizer", optimizer)  # accelerate's AcceleratedOptimizer wraps one


def full_training_state(
    model: torch.nn.Module, optimizer: torch.optim.Optimizer
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Full model and optimizer state dicts (keyed by parameter name), gathered to the main
    process; other ranks get empty dicts. Collective: every rank calls it. Some tensors may alias
    live state: serialise (or copy) them before the next optimizer step."""
    from torch.distributed.checkpoint.state_dict import get_state_dict

    return get_state_dict(model, _inner(optimizer), options=_options())


def load_full_training_state(
    model: torch.nn.Module, optimizer: torch.optim.Optimizer, model_state: dict, optim_state: dict
) -> None:
    """Load what :func:`full_training_state` saved into the sharded model and optimizer (every rank
    read the checkpoint; each keeps its own slice). Collective. The model must match exactly; the
    optimizer may lack state for parameters that never had a gradient (an unused pooler)."""
    from torch.distributed.checkpoint.state_dict import set_model_state_dict, set_optimizer_state_dict

    set_model_state_dict(model, model_state, options=_options())
    set_optimizer_state_dict(model, _inner(optimizer), optim_state, options=_options(strict=False))
