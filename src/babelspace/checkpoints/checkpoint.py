"""Checkpoints that survive interruption, belong to one run and never execute code on load.

A checkpoint is a folder ``<output>/checkpoints/step-<N>/`` (its files, formats and definition of
complete: :mod:`babelspace.checkpoints.files`). :func:`save_checkpoint` writes it into a temporary
folder ``.tmp-step-<N>-<pid>``: first ``Accelerator.save_state`` (model as ``model.safetensors``,
``optimizer.bin``, ``scheduler.bin``, ``scaler.pt``, ``random_states_0.pkl``:
:mod:`~babelspace.checkpoints.accelerated`), then babelspace's ``state.pt`` (sampler position,
progress, every rank's random state, step, dev history, corpus fingerprint, run id, config), then
``meta.json`` with a manifest of every file's size and sha256; each file is flushed (fsync) and the
folder renamed into place only once complete, so a crash mid-write never corrupts the last good
checkpoint; an incomplete temporary folder is ignored and cleaned up on the next run. Under FSDP
``state.pt`` holds everything, gathered by
babelspace itself (:mod:`~babelspace.training.sharded`).

Loading: :func:`load_latest` checks the newest checkpoint against its manifest and reads every
pickled file with ``torch.load(weights_only=True)``, which only rebuilds tensors and plain
containers (dict, list, tuple, str, int, float, bool, None), *before* anything in it is used; only
then does the resumed run hand the folder to ``Accelerator.load_state``
(``load_kwargs={"weights_only": True}``). The RNG states in ``state.pt`` are stored in that
vocabulary (:func:`rng_state`). Parts that stay babelspace's own, and why, are listed in
:mod:`~babelspace.checkpoints.accelerated`.

* A file that names any other Python callable — a crafted pickle whose ``__reduce__`` would run a
  command — is refused with :class:`UnsafeCheckpointError` and nothing in it runs. An unsafe
  checkpoint stops the run instead of falling back to an older one: someone wrote it on purpose,
  and silently continuing from an earlier step would hide that.
* A checkpoint that does not match its manifest (a file missing, truncated, edited or added: a
  foreign ``custom_checkpoint_0.pkl``, another run's ``optimizer.bin``) or is merely damaged
  (unreadable) is reported in one line naming the file, and the previous checkpoint is used.

Ownership: every checkpoint records the id of the run that wrote it (:func:`new_run_id`).
Pruning (``keep_last``) only removes checkpoints of the same run, and :func:`list_checkpoints`
can be restricted to one run, so a fresh run in a folder that holds an older run's checkpoints
neither deletes its own new checkpoints nor resumes the old run by mistake.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import random
import shutil
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors import SafetensorError

from babelspace.checkpoints.files import (
    META_FILE,
    PREFIX,
    STATE_FILE,
    CheckpointMismatch,
    UnsafeCheckpointError,
    checkpoint_format,
    checkpoint_root,
    list_checkpoints,
    manifest,
    read_all,
    read_meta,
    read_state,
    step_of,
    verify,
    written_ns,
)
from babelspace.disk import failure_reason, space_message
from babelspace.errors import TrainingError, first_error_line

logger = logging.getLogger(__name__)

# writes a checkpoint's other files into its temporary folder; returns what meta.json adds
SaveParts = Callable[[Path], dict[str, Any]]


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


def checkpoint_runs(output: Path) -> dict[str | None, int]:
    """Run ids found among the checkpoints of ``output`` with the highest step of each
    (``None``: checkpoints written before run ids existed)."""
    runs: dict[str | None, int] = {}
    for p in list_checkpoints(output):
        rid = (read_meta(p) or {}).get("run_id")
        runs[rid] = max(runs.get(rid, 0), step_of(p) or 0)
    return runs


def resume_note(output: Path, run_id: str | None = None) -> str:
    """What a stopped run can continue from, as it is: the newest checkpoint (of ``run_id`` when
    it wrote any) and ``--resume``, or that there is none, so that ``--resume`` would be refused."""
    found = list_checkpoints(output, run_id) or list_checkpoints(output)
    if found:
        return (
            f"the checkpoint at step {step_of(found[-1])} is intact: rerun with --resume to continue from it"
        )
    return "no checkpoint was written, so --resume has nothing to continue from: rerun with --overwrite"


def latest_run_id(output: Path) -> str | None:
    """The run id of the most recently written checkpoint (by ``meta.json`` mtime), the run a
    ``--resume`` continues; None when there is none (or it predates run ids)."""
    found = list_checkpoints(output)
    if not found:
        return None
    newest = max(found, key=lambda p: (written_ns(p), step_of(p) or 0))
    return (read_meta(newest) or {}).get("run_id")


def save_checkpoint(
    output: Path,
    step: int,
    state: dict[str, Any],
    keep_last: int | None = None,
    run_id: str | None = None,
    save_parts: SaveParts | None = None,
    parts_bytes: int = 0,
) -> Path:
    """Write atomically: temp folder, fsync, rename. ``save_parts`` writes the files beside
    ``state.pt`` (accelerate's ``save_state``; about ``parts_bytes`` bytes); without it ``state.pt``
    holds everything. Prunes this run's checkpoints to the newest ``keep_last``; checkpoints of
    other runs are never touched. ``run_id`` defaults to ``state["run_id"]`` and is stored in both
    ``state.pt`` and ``meta.json``."""
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
        _write_checkpoint(tmp, final, step, state, run_id, save_parts)
    except BaseException as exc:
        shutil.rmtree(tmp, ignore_errors=True)  # a full disk keeps no partial checkpoint
        # torch.save reports a full disk as RuntimeError, safetensors as SafetensorError
        if not isinstance(exc, (OSError, RuntimeError, SafetensorError)):
            raise
        needed = state_bytes(state) + parts_bytes
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


def _write_checkpoint(
    tmp: Path, final: Path, step: int, state: dict[str, Any], run_id: str | None, save_parts: SaveParts | None
) -> None:
    extra = save_parts(tmp) if save_parts is not None else {"format": "state"}
    with open(tmp / STATE_FILE, "wb") as fh:
        torch.save(state, fh)
    meta = {
        "step": step,
        "run_id": run_id,
        "fingerprint": state.get("fingerprint"),
        "objective": state.get("objective_name"),
        **extra,
        "files": manifest(tmp),  # flushes every file to disk
    }
    with open(tmp / META_FILE, "w") as fh:
        fh.write(json.dumps(meta))
        fh.flush()
        os.fsync(fh.fileno())
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


def load_state(path: Path, whole: bool = True) -> dict[str, Any]:
    """One checkpoint, checked first (:func:`~babelspace.checkpoints.files.verify`: its manifest,
    and every pickled file read with ``weights_only=True``, so no code runs). ``whole``: the whole
    checkpoint as one dict (:func:`~babelspace.checkpoints.files.read_all`); otherwise the run state
    of ``state.pt`` only (a resumed run hands the rest to ``Accelerator.load_state``).

    Raises :class:`UnsafeCheckpointError` for a file that holds anything beyond tensors and plain
    containers, :class:`~babelspace.checkpoints.files.CheckpointMismatch` for one that is not what
    its manifest lists; other read errors propagate unchanged."""
    verify(path)
    state = read_all(path) if whole else read_state(path)
    if not whole and checkpoint_format(path) != "accelerate":  # a resume needs state.pt to hold them
        missing = [key for key in ("objective", "optimizer", "scheduler", "step") if key not in state]
        if missing:
            raise CheckpointMismatch(
                f"{path}: {STATE_FILE} holds no {', '.join(missing)}; it cannot be resumed"
            )
    return state


def load_latest(
    output: Path, run_id: str | None = None, whole: bool = True
) -> tuple[Path, dict[str, Any]] | None:
    """The newest checkpoint that loads (of ``run_id`` if given; ``whole``: see :func:`load_state`);
    a damaged or mismatched one is reported and the previous one used. An unsafe one raises
    :class:`UnsafeCheckpointError` (no fallback)."""
    cleanup_partial(output)
    for path in reversed(list_checkpoints(output, run_id)):
        try:
            state = load_state(path, whole)
        except UnsafeCheckpointError:
            raise
        except Exception as exc:  # noqa: BLE001 - any unreadable checkpoint falls back to the previous one
            logger.warning("checkpoint %s cannot be read (%s); trying an older one", path, exc)
            continue
        return path, state
    return None


def unusable_reason(output: Path, run_id: str | None = None) -> str | None:
    """Why the newest checkpoint (of ``run_id`` if given) cannot be used, as one line; None when
    there is none or it loads."""
    found = list_checkpoints(output, run_id)
    if not found:
        return None
    try:
        load_state(found[-1], whole=False)
    except Exception as exc:  # noqa: BLE001 - the reason is reported, whatever it is
        return first_error_line(exc)
    return None
