"""Which settings a resumed run may change, and how a change is named: the comparison of a
checkpoint's config with the resuming run's (:func:`config_changes`), read by
:func:`babelspace.training.state.run_state.check_resume`."""

from __future__ import annotations

import math
from dataclasses import fields
from typing import Any

from babelspace.config_fields import flag_name
from babelspace.errors import BabelspaceError
from babelspace.training.config import TrainConfig

# Settings that may change on --resume without changing the trajectory of the weights: where
# things are written, how often checkpoints/evaluations happen, threads, the final test table,
# and how long to train (extending --max-steps/--epochs continues the run; note the linear
# learning-rate schedule then decays towards the new end).
RESUME_SAFE_SETTINGS = frozenset(
    {
        "output",
        "resume",
        "force_resume",
        "overwrite",
        "save_every",
        "keep_last",
        "threads",
        "cache_dir",
        "eval_every",
        "test_sentences",
        "max_steps",
        "epochs",
        "model_from",
        # not export_space / export_norm: with --teacher-contrast-space exported they change
        # what the contrastive term ranks, hence the weights
        "skip_nonfinite",
        "log_every",  # when the device's step flags are read: no effect on the weights
        "report_to",  # where the loss and dev scores are also sent
        "recipe",  # a label: the fields it sets are compared one by one
        "device",  # resuming on another device is legitimate (float results differ slightly)
        "token_cache",  # token ids looked up or tokenized: the same batches
    }
)
# fields whose change is shown the way round of the flag that sets them: field -> that flag
_INVERTED = {"freeze_embeddings": "--train-embeddings"}


def _effective(config: dict[str, Any]) -> dict[str, Any]:
    """``config`` with "objective default" values (``None``) replaced by what they resolve to."""
    known = {f.name for f in fields(TrainConfig)}
    try:
        cfg = TrainConfig(**{k: v for k, v in config.items() if k in known})
    except (TypeError, ValueError, BabelspaceError):
        return config
    return {**config, "lr": cfg.learning_rate(), "freeze_embeddings": cfg.frozen_embeddings}


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def config_changes(saved: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """The settings whose change between the checkpoint's config (``saved``) and the resuming run's
    (``new``) would alter the training trajectory, as ``"--flag-name old -> new"``.

    Every key counts unless it is in :data:`RESUME_SAFE_SETTINGS` (so a setting added later is
    checked by default). ``lr`` and ``freeze_embeddings`` are compared as the values they resolve
    to (``None`` means the objective's default). Keys present on one side only are compared against ``None``."""
    saved, new = _effective(saved), _effective(new)
    changes = []
    for key in sorted(set(saved) | set(new)):
        if key in RESUME_SAFE_SETTINGS:
            continue
        old, now = saved.get(key), new.get(key)
        if _same(old, now):
            continue
        if key in _INVERTED:
            old = None if old is None else not old
            now = None if now is None else not now
        flag = _flag(key)
        changes.append(f"{flag} {_show(old)} -> {_show(now)}")
    return changes


def _flag(key: str) -> str:
    """The flag that sets config field ``key`` (``--train-embeddings`` for the inverted embeddings
    field, whose change is shown the flag's way round)."""
    if key in _INVERTED:
        return _INVERTED[key]
    try:
        return flag_name(TrainConfig, key)
    except KeyError:  # a setting this TrainConfig lacks: still named, so the refusal is one line
        return "--" + key.replace("_", "-")


def _show(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return ",".join(map(str, value))
    return str(value)
