"""The model, optimizer, schedule and loss scaler of a checkpoint through accelerate's
``Accelerator.save_state`` / ``Accelerator.load_state`` (the ``accelerate`` format of
:mod:`babelspace.checkpoints.files`).

* **Saving**: the main process calls ``save_state(tmp, safe_serialization=True)`` on the
  checkpoint's temporary folder (:func:`saver`), which
  :func:`~babelspace.checkpoints.checkpoint.save_checkpoint` then completes with ``state.pt``
  and ``meta.json`` and renames into place. accelerate writes
  ``model.safetensors`` (no pickle), ``optimizer.bin``, ``scheduler.bin``, ``scaler.pt`` (fp16) and
  ``random_states_0.pkl`` (torch-saved).
* **Names**: a save/load pre-hook hands accelerate the unwrapped objective, so keys carry no DDP
  ``module.`` prefix: a checkpoint of two processes resumes in one, and its keys are the objective's
  own. Tensors the objective ties (a decoder's output and the student's input embeddings, the
  student shared by the parts of a composition) are stored once; ``meta.json`` lists each group
  (``tied``) so the whole state dict can be read back
  (:func:`~babelspace.checkpoints.files.read_weights`).
* **Loading** (:func:`load_parts`) happens only after babelspace's checks of the folder
  (:func:`~babelspace.checkpoints.files.verify`: its manifest, and a ``weights_only`` read of every
  pickled file), with ``load_state(dir, load_kwargs={"weights_only": True})``; accelerate 1.15 reads
  the optimizer, schedule, scaler and random states with ``weights_only=True`` and the model with
  safetensors. Anything it still refuses or cannot fit is one line.

What stays babelspace's own, in ``state.pt`` (read with ``weights_only=True``):

* the **sampler position and the progress** (step, dev history, counters): objects registered with
  ``register_for_checkpointing`` are read back by accelerate's ``load_custom_state``, which always
  passes ``weights_only=False`` (accelerate 1.15), i.e. unpickles whatever the file holds;
* **every rank's random state**: ``save_state`` writes ``random_states_<rank>.pkl`` from each
  process into one folder, whereas babelspace's main process alone writes checkpoints (other ranks'
  states are gathered to it, :mod:`~babelspace.training.collective`), and ``load_state`` swallows a
  failure to restore them (a silently unrestored state breaks exact resume without a word). So
  ``load_state`` restores the main process's state from ``random_states_0.pkl`` and babelspace then
  sets each rank's own (the same state on the main process);
* **FSDP** runs: the full model and optimizer state gathered by
  :mod:`~babelspace.training.sharded` (accelerate's FSDP saving writes whatever its plugin's
  ``state_dict_type`` says, sharded by default, which ties a checkpoint to its number of processes).
"""

from __future__ import annotations

import logging
import pickle
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch

from babelspace.checkpoints.checkpoint import state_bytes
from babelspace.checkpoints.files import is_unsafe_pickle, unsafe_error
from babelspace.errors import TrainingError, first_error_line

FORMAT = "accelerate"
_ACCELERATE_LOGGERS = ("accelerate.accelerator", "accelerate.checkpointing")


def tied_names(state: dict[str, torch.Tensor]) -> list[list[str]]:
    """Groups of names whose tensors are one tensor (same storage, offset and shape), in order."""
    groups: dict[tuple, list[str]] = {}
    for name, t in state.items():
        if t.numel() == 0:  # empty tensors share no data, whatever their pointer
            continue
        key = (t.device, t.untyped_storage().data_ptr(), t.storage_offset(), tuple(t.shape), t.dtype)
        groups.setdefault(key, []).append(name)
    return [names for names in groups.values() if len(names) > 1]


def _stored_once(state: dict[str, torch.Tensor], tied: list[list[str]]) -> OrderedDict:
    """``state`` with every tied tensor under its first name only (safetensors stores no aliases)."""
    dropped = {n for group in tied for n in group[1:]}
    return OrderedDict((k, v) for k, v in state.items() if k not in dropped)


@contextmanager
def _unwrapped(acc: Any) -> Iterator[None]:
    """While saving or loading: accelerate's models unwrapped (no DDP ``module.`` prefix), on save
    tied tensors stored once, and accelerate's per-file INFO lines ("Model weights saved in ...",
    six per checkpoint) held back; its warnings and errors still show."""

    def on_save(models: list, weights: list, _folder: str) -> None:
        for i, model in enumerate(models):
            state = acc.unwrap_model(model).state_dict()
            weights[i] = _stored_once(state, tied_names(state))

    def on_load(models: list, _folder: str) -> None:
        models[:] = [acc.unwrap_model(m) for m in models]

    handles = [acc.register_save_state_pre_hook(on_save), acc.register_load_state_pre_hook(on_load)]
    loggers = [logging.getLogger(name) for name in _ACCELERATE_LOGGERS]
    levels = [log.level for log in loggers]
    for log in loggers:
        log.setLevel(max(log.getEffectiveLevel(), logging.WARNING))
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()
        for log, level in zip(loggers, levels, strict=True):
            log.setLevel(level)


def saver(acc: Any, objective: torch.nn.Module) -> Callable[[Path], dict[str, Any]]:
    """What :func:`~babelspace.checkpoints.checkpoint.save_checkpoint` calls on its temporary
    folder: accelerate's ``save_state``; returns what ``meta.json`` records of it."""

    def save(folder: Path) -> dict[str, Any]:
        with _unwrapped(acc):
            acc.save_state(str(folder), safe_serialization=True)
        return {"format": FORMAT, "tied": tied_names(objective.state_dict())}

    return save


def parts_bytes(objective: torch.nn.Module, optimizer: Any) -> int:
    """About what ``save_state`` writes: the objective's tensors and the optimizer's state."""
    return state_bytes(objective.state_dict()) + state_bytes(optimizer.state_dict())


def load_parts(acc: Any, path: Path) -> None:
    """Restore the model, optimizer, schedule, loss scaler and the main process's random state
    from a checked checkpoint folder with ``Accelerator.load_state`` (``weights_only=True``)."""
    try:
        with _unwrapped(acc):
            acc.load_state(str(path), load_kwargs={"weights_only": True})
    except pickle.UnpicklingError as exc:
        if is_unsafe_pickle(exc):
            raise unsafe_error(path, exc) from None
        raise TrainingError(f"{path}: cannot read the checkpoint ({first_error_line(exc)})") from None
    except (RuntimeError, ValueError, KeyError, OSError) as exc:
        raise TrainingError(
            f"{path}: the checkpoint does not fit this run's model or optimizer ({first_error_line(exc)}); "
            "resume it with the settings it was written with, or start a new run in another --out"
        ) from None
