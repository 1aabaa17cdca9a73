"""Checkpoints that survive interruption, belong to one run and never execute code on load.

A checkpoint is a folder ``<output>/checkpoints/step-<N>/`` holding ``state.pt`` (objective state —
student *and* heads — optimizer, scheduler, sampler position, RNG states of Python, NumPy and torch,
step, dev history, corpus fingerprint, run id, config) and ``meta.json`` (step, run id,
fingerprint, objective). It is written into a temporary folder and renamed into place only once
complete, so a crash mid-write never corrupts the last good checkpoint; an incomplete temporary
folder is ignored and cleaned up on the next run.

Safety: ``state.pt`` is read with ``torch.load(weights_only=True)``, which only rebuilds tensors and
plain containers (dict, list, tuple, str, int, float, bool, None). The RNG states are stored in
that vocabulary (:func:`rng_state`). A file that names any other Python callable — a crafted
pickle whose ``__reduce__`` would run a command — is refused with :class:`UnsafeCheckpointError`
and nothing in it runs. An unsafe checkpoint stops the run instead of falling back to an older
one: someone wrote it on purpose, and silently continuing from an earlier step would hide that.
A merely damaged file (truncated, unreadable) still falls back to the previous checkpoint.

Ownership: every checkpoint records the id of the run that wrote it (:func:`new_run_id`).
Pruning (``keep_last``) only removes checkpoints of the same run, and :func:`list_checkpoints`
can be restricted to one run, so a fresh run in a folder that holds an older run's checkpoints
neither deletes its own new checkpoints nor resumes the old run by mistake.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import pickle
import random
import re
import shutil
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import torch

from babelspace.errors import BabelspaceError, TrainingError
from babelspace.training.disk import failure_reason, space_message

logger = logging.getLogger(__name__)

PREFIX = "step-"


class UnsafeCheckpointError(TrainingError):
    """A checkpoint holds objects other than tensors and plain containers (it could run code)."""


def new_run_id() -> str:
    """A fresh id for one training run (stored in each of its checkpoints)."""
    return uuid.uuid4().hex[:12]


def rng_state() -> dict[str, Any]:
    """Python, NumPy, torch CPU and (when CUDA is available) every CUDA device's RNG states, as
    tensors, lists, ints and floats only, so that the checkpoint loads with ``weights_only=True``.
    One process's state: under torchrun each rank's is gathered into the checkpoint
    (:mod:`~babelspace.training.collective`)."""
    version, internal, gauss = random.getstate()
    kind, keys, pos, has_gauss, cached = np.random.get_state()
    return {
        "python": {"version": int(version), "state": list(internal), "gauss": gauss},
        "numpy": {
            "kind": str(kind),
            "keys": torch.from_numpy(np.asarray(keys, dtype=np.int64)),
            "pos": int(pos),
            "has_gauss": int(has_gauss),
            "cached_gaussian": float(cached),
        },
        "torch": torch.get_rng_state(),
        "cuda": list(torch.cuda.get_rng_state_all()) if torch.cuda.is_available() else None,
    }


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore what :func:`rng_state` stored."""
    py = state["python"]
    random.setstate((py["version"], tuple(int(x) for x in py["state"]), py["gauss"]))
    npy = state["numpy"]
    keys = np.asarray(npy["keys"].numpy() if torch.is_tensor(npy["keys"]) else npy["keys"], dtype=np.uint32)
    np.random.set_state((npy["kind"], keys, npy["pos"], npy["has_gauss"], npy["cached_gaussian"]))
    torch.set_rng_state(state["torch"])
    cuda = state.get("cuda")
    if cuda and torch.cuda.is_available():
        if len(cuda) == torch.cuda.device_count():
            torch.cuda.set_rng_state_all(cuda)
        else:
            logger.warning(
                "the checkpoint holds the CUDA random state of %d device(s) and this machine has %d: "
                "CUDA random draws (dropout on the GPU) differ from an uninterrupted run",
                len(cuda),
                torch.cuda.device_count(),
            )


def checkpoint_root(output: Path) -> Path:
    return Path(output) / "checkpoints"


def _step_of(path: Path) -> int | None:
    """The step number of a ``step-<N>`` folder, or None for any other name (``step-backup``)."""
    digits = path.name[len(PREFIX) :]
    return int(digits) if path.name.startswith(PREFIX) and digits.isdigit() else None


def read_meta(path: Path) -> dict[str, Any] | None:
    """A checkpoint's ``meta.json``, or None if missing or unreadable."""
    try:
        meta = json.loads((path / "meta.json").read_text())
    except (OSError, ValueError):
        return None
    return meta if isinstance(meta, dict) else None


def list_checkpoints(output: Path, run_id: str | None = None) -> list[Path]:
    """Complete checkpoints, oldest first; only those written by ``run_id`` when it is given.

    Folders that are not ``step-<digits>`` (a user's ``step-backup`` copy) are ignored."""
    root = checkpoint_root(output)
    if not root.is_dir():
        return []
    found = []
    for p in root.iterdir():
        if not p.is_dir() or _step_of(p) is None or not (p / "meta.json").exists():
            continue
        if run_id is not None and (read_meta(p) or {}).get("run_id") != run_id:
            continue
        found.append(p)
    return sorted(found, key=lambda p: _step_of(p) or 0)


def checkpoint_runs(output: Path) -> dict[str | None, int]:
    """Run ids found among the checkpoints of ``output`` with the highest step of each
    (``None``: checkpoints written before run ids existed)."""
    runs: dict[str | None, int] = {}
    for p in list_checkpoints(output):
        rid = (read_meta(p) or {}).get("run_id")
        runs[rid] = max(runs.get(rid, 0), _step_of(p) or 0)
    return runs


def resume_note(output: Path, run_id: str | None = None) -> str:
    """What a stopped run can continue from, as it is: the newest checkpoint (of ``run_id`` when
    it wrote any) and ``--resume``, or that there is none, so that ``--resume`` would be refused."""
    found = list_checkpoints(output, run_id) or list_checkpoints(output)
    if found:
        return (
            f"the checkpoint at step {_step_of(found[-1])} is intact: rerun with --resume to continue from it"
        )
    return "no checkpoint was written, so --resume has nothing to continue from: rerun with --overwrite"


def latest_run_id(output: Path) -> str | None:
    """The run id of the most recently written checkpoint (by ``meta.json`` mtime), the run a
    ``--resume`` continues; None when there is none (or it predates run ids)."""
    found = list_checkpoints(output)
    if not found:
        return None
    newest = max(found, key=lambda p: ((p / "meta.json").stat().st_mtime_ns, _step_of(p) or 0))
    return (read_meta(newest) or {}).get("run_id")


def save_checkpoint(
    output: Path,
    step: int,
    state: dict[str, Any],
    keep_last: int | None = None,
    run_id: str | None = None,
) -> Path:
    """Write atomically: temp folder, fsync, rename. Prunes this run's checkpoints to the newest
    ``keep_last``; checkpoints of other runs are never touched. ``run_id`` defaults to
    ``state["run_id"]`` and is stored in both ``state.pt`` and ``meta.json``."""
    run_id = run_id if run_id is not None else state.get("run_id")
    state = {**state, "run_id": run_id}
    root = checkpoint_root(output)
    root.mkdir(parents=True, exist_ok=True)
    final = root / f"{PREFIX}{step:08d}"
    tmp = root / f".tmp-{PREFIX}{step:08d}-{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    try:
        _write_checkpoint(tmp, final, step, state, run_id)
    except BaseException as exc:
        shutil.rmtree(tmp, ignore_errors=True)  # a full disk keeps no partial checkpoint
        if not isinstance(exc, (OSError, RuntimeError)):  # torch.save reports a full disk as RuntimeError
            raise
        needed = state_bytes(state)
        message = (
            f"could not write checkpoint {final} ({failure_reason(exc, root, needed)}): "
            f"{space_message(root, needed)}; free disk space or point --out elsewhere; "
        )
        with contextlib.suppress(OSError):
            root.rmdir()  # a first checkpoint that did not fit leaves no empty checkpoints/ behind
        raise TrainingError(message + resume_note(output, run_id)) from exc
    if keep_last:
        mine = [p for p in list_checkpoints(output) if (read_meta(p) or {}).get("run_id") == run_id]
        for old in mine[:-keep_last]:
            shutil.rmtree(old, ignore_errors=True)
    return final


def _write_checkpoint(tmp: Path, final: Path, step: int, state: dict[str, Any], run_id: str | None) -> None:
    with open(tmp / "state.pt", "wb") as fh:
        torch.save(state, fh)
        fh.flush()
        os.fsync(fh.fileno())
    meta = {
        "step": step,
        "run_id": run_id,
        "fingerprint": state.get("fingerprint"),
        "objective": state.get("objective_name"),
    }
    (tmp / "meta.json").write_text(json.dumps(meta))
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)


def state_bytes(state: Any) -> int:
    """Bytes of the tensors in a (nested) checkpoint state: about what ``torch.save`` writes."""
    if isinstance(state, torch.Tensor):
        return state.numel() * state.element_size()
    if isinstance(state, dict):
        return sum(state_bytes(v) for v in state.values())
    if isinstance(state, (list, tuple)):
        return sum(state_bytes(v) for v in state)
    return 0


def cleanup_partial(output: Path) -> None:
    root = checkpoint_root(output)
    if root.exists():
        for p in root.glob(f".tmp-{PREFIX}*"):
            logger.warning("removing incomplete checkpoint %s (interrupted while writing)", p)
            shutil.rmtree(p, ignore_errors=True)


def _is_unsafe(exc: Exception) -> bool:
    """True when ``weights_only`` refused the file because it names a non-allow-listed global
    (code), as opposed to bytes that are merely damaged."""
    return isinstance(exc, pickle.UnpicklingError) and "unsupported global" in str(exc).lower()


def load_state(path: Path) -> dict[str, Any]:
    """Load one checkpoint's ``state.pt`` with ``weights_only=True`` (no code runs).

    Raises :class:`UnsafeCheckpointError` if it holds anything beyond tensors and plain
    containers; other read errors propagate unchanged."""
    try:
        state = torch.load(path / "state.pt", map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        if _is_unsafe(exc):
            found = re.search(r"GLOBAL (\S+)", str(exc))
            what = f"it names {found.group(1)}" if found else "a non-allow-listed global"
            raise UnsafeCheckpointError(
                f"{path / 'state.pt'}: refusing to load a checkpoint that holds Python objects other "
                f"than tensors and plain values ({what}); loading it could run code. Delete it if you "
                "did not write it, or start a fresh run in a new --out"
            ) from None
        raise
    if not isinstance(state, dict):
        raise UnsafeCheckpointError(f"{path / 'state.pt'}: not a babelspace checkpoint (no state dict)")
    return state


def load_latest(output: Path, run_id: str | None = None) -> tuple[Path, dict[str, Any]] | None:
    """The newest checkpoint that loads (of ``run_id`` if given); a damaged one is reported and the
    previous one used. An unsafe one raises :class:`UnsafeCheckpointError` (no fallback)."""
    cleanup_partial(output)
    for path in reversed(list_checkpoints(output, run_id)):
        try:
            state = load_state(path)
        except UnsafeCheckpointError:
            raise
        except Exception as exc:  # noqa: BLE001 - any unreadable checkpoint falls back to the previous one
            logger.warning("checkpoint %s cannot be read (%s); trying an older one", path, exc)
            continue
        return path, state
    return None


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
        "export",
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
_FLAG_NAMES = {"freeze_embeddings": "--train-embeddings", "output": "--out"}
_INVERTED = {"freeze_embeddings"}


def _effective(config: dict[str, Any]) -> dict[str, Any]:
    """``config`` with "objective default" values (``None``) replaced by what they resolve to."""
    from dataclasses import fields

    from babelspace.training.config import TrainConfig

    known = {f.name for f in fields(TrainConfig)}
    try:
        cfg = TrainConfig(**{k: v for k, v in config.items() if k in known})
    except (TypeError, ValueError, BabelspaceError):
        return config
    # grad_accum: checkpoints older than the flag ran one pass per step
    return {
        **config,
        "lr": cfg.learning_rate(),
        "freeze_embeddings": cfg.frozen_embeddings,
        "grad_accum": cfg.grad_accum,
    }


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
        flag = _FLAG_NAMES.get(key, "--" + key.replace("_", "-"))
        changes.append(f"{flag} {_show(old)} -> {_show(now)}")
    return changes


def _show(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return ",".join(map(str, value))
    return str(value)
