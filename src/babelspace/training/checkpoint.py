"""Checkpoints that survive interruption.

A checkpoint is a folder ``<output>/checkpoints/step-<N>/`` holding ``state.pt`` (objective state —
student *and* heads — optimizer, scheduler, sampler position, RNG states of Python, NumPy and torch,
step, dev history, corpus fingerprint) and ``meta.json``. It is written into a temporary folder
and renamed into place only once complete, so a crash mid-write never corrupts the last good
checkpoint; an incomplete temporary folder is ignored and cleaned up on the next run.
"""

from __future__ import annotations

import json
import logging
import os
import random
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch

from babelspace.errors import TrainingError

logger = logging.getLogger(__name__)

PREFIX = "step-"


def rng_state() -> dict[str, Any]:
    return {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])


def checkpoint_root(output: Path) -> Path:
    return Path(output) / "checkpoints"


def list_checkpoints(output: Path) -> list[Path]:
    """Complete checkpoints, oldest first."""
    root = checkpoint_root(output)
    if not root.exists():
        return []
    found = [
        p for p in root.iterdir() if p.is_dir() and p.name.startswith(PREFIX) and (p / "meta.json").exists()
    ]
    return sorted(found, key=lambda p: int(p.name[len(PREFIX) :]))


def save_checkpoint(output: Path, step: int, state: dict[str, Any], keep_last: int | None = None) -> Path:
    """Write atomically: temp folder, fsync, rename. Prunes to the newest ``keep_last``."""
    root = checkpoint_root(output)
    root.mkdir(parents=True, exist_ok=True)
    final = root / f"{PREFIX}{step:08d}"
    tmp = root / f".tmp-{PREFIX}{step:08d}-{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    try:
        with open(tmp / "state.pt", "wb") as fh:
            torch.save(state, fh)
            fh.flush()
            os.fsync(fh.fileno())
        meta = {
            "step": step,
            "fingerprint": state.get("fingerprint"),
            "objective": state.get("objective_name"),
        }
        (tmp / "meta.json").write_text(json.dumps(meta))
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)
    except OSError as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise TrainingError(
            f"could not write checkpoint {final} ({exc}); the previous checkpoint is intact. "
            "Free disk space or point --output elsewhere, then rerun with --resume"
        ) from exc
    if keep_last:
        for old in list_checkpoints(output)[:-keep_last]:
            shutil.rmtree(old, ignore_errors=True)
    return final


def cleanup_partial(output: Path) -> None:
    root = checkpoint_root(output)
    if root.exists():
        for p in root.glob(f".tmp-{PREFIX}*"):
            logger.warning("removing incomplete checkpoint %s (interrupted while writing)", p)
            shutil.rmtree(p, ignore_errors=True)


def load_latest(output: Path) -> tuple[Path, dict[str, Any]] | None:
    """The newest checkpoint that loads; a damaged one is reported and the previous one used."""
    cleanup_partial(output)
    for path in reversed(list_checkpoints(output)):
        try:
            state = torch.load(path / "state.pt", map_location="cpu", weights_only=False)
        except Exception as exc:  # noqa: BLE001 - any unreadable checkpoint falls back to the previous one
            logger.warning("checkpoint %s cannot be read (%s); trying an older one", path, exc)
            continue
        return path, state
    return None
