"""Training checkpoint folders on disk: where they are, which are complete, their manifest, and
their contents read without running code. The one definition that ``babelspace train --resume``
(:mod:`babelspace.checkpoints.checkpoint`) and ``babelspace decode --checkpoint``
(:mod:`babelspace.objectives.decoding`) share.

A checkpoint is a folder ``<output>/checkpoints/step-<N>/`` (N: digits). Its ``meta.json`` holds the
step, run id, corpus fingerprint, objective, ``format`` and a manifest ``files``: the size and sha256
of every other file in the folder. babelspace writes ``meta.json`` last, into a temporary folder
renamed into place whole, so **a ``step-<N>`` folder with a ``meta.json`` is complete**. A
``step-<N>`` folder with a ``state.pt`` and no ``meta.json`` (one written by hand,
``torch.save({"objective": ...})``) counts too, read in the ``state`` format. Two formats:

* ``accelerate``: the files ``Accelerator.save_state`` writes (``model.safetensors``,
  ``optimizer.bin``, ``scheduler.bin``, ``scaler.pt`` under fp16, ``random_states_0.pkl``) and
  babelspace's ``state.pt`` (the run state: sampler position, progress, every rank's random state,
  config, fingerprint, run id);
* ``state``: everything in ``state.pt`` (FSDP runs, whose full state babelspace gathers itself).

:func:`verify` compares a folder with its manifest (a missing, resized, changed or unlisted file is
a :class:`CheckpointMismatch`) and reads every pickled file once with ``torch.load(weights_only=True)``
(tensors and plain containers only); a file that names any other Python callable is an
:class:`UnsafeCheckpointError` and nothing in it runs. ``model.safetensors`` holds no code by design.
"""

from __future__ import annotations

import codecs
import contextlib
import hashlib
import json
import os
import pickle
import pickletools
import re
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import torch

from babelspace.errors import ResourceError, TrainingError

PREFIX = "step-"
STATE_FILE = "state.pt"
META_FILE = "meta.json"
WEIGHTS_FILE = "model.safetensors"
# accelerate's file names for the optimizer, schedule and loss scaler (accelerate.utils.constants)
PART_FILES = {"optimizer": "optimizer.bin", "scheduler": "scheduler.bin", "scaler": "scaler.pt"}
_RNG_FILES = re.compile(r"^random_states_\d+\.pkl$")
# what accelerate pickles a NumPy random state with (its own allow-list for random_states_*.pkl)
_NP_CORE = np._core if hasattr(np, "_core") else np.core
_NUMPY_GLOBALS = [
    _NP_CORE.multiarray._reconstruct,
    np.ndarray,
    np.dtype,
    codecs.encode,
    type(np.dtype(np.uint32)),
]


class UnsafeCheckpointError(TrainingError):
    """A checkpoint holds objects other than tensors and plain containers (it could run code)."""


class CheckpointMismatch(ResourceError):
    """A checkpoint folder does not match its manifest (damaged, edited, or holds a foreign file)."""


def checkpoint_root(output: Path) -> Path:
    return Path(output) / "checkpoints"


def step_of(path: Path) -> int | None:
    """The step number of a ``step-<N>`` folder, or None for any other name (``step-backup``)."""
    digits = path.name[len(PREFIX) :]
    return int(digits) if path.name.startswith(PREFIX) and digits.isdigit() else None


def read_meta(path: Path) -> dict[str, Any] | None:
    """A checkpoint's ``meta.json``, or None if missing or unreadable."""
    try:
        meta = json.loads((path / META_FILE).read_text())
    except (OSError, ValueError):
        return None
    return meta if isinstance(meta, dict) else None


def is_complete(path: Path) -> bool:
    """A ``step-<digits>`` folder with a ``meta.json`` (written last), or with a ``state.pt`` alone."""
    if step_of(path) is None or not path.is_dir():
        return False
    return (path / META_FILE).is_file() or (path / STATE_FILE).is_file()


def list_checkpoints(output: Path, run_id: str | None = None) -> list[Path]:
    """Complete checkpoints of ``output``, oldest first; only those written by ``run_id`` when it is
    given. Folders that are not ``step-<digits>`` (a user's ``step-backup`` copy) are ignored."""
    root = checkpoint_root(output)
    if not root.is_dir():
        return []
    found = [p for p in root.iterdir() if is_complete(p)]
    if run_id is not None:
        found = [p for p in found if (read_meta(p) or {}).get("run_id") == run_id]
    return sorted(found, key=lambda p: step_of(p) or 0)


def written_ns(path: Path) -> int:
    """When a complete checkpoint was written (its ``meta.json``'s mtime, else its ``state.pt``'s)."""
    meta = path / META_FILE
    return (meta if meta.is_file() else path / STATE_FILE).stat().st_mtime_ns


def resolve_checkpoint(path: Path) -> Path:
    """A checkpoint given as a ``state.pt`` file, a ``step-N`` folder, or an output folder (its
    newest complete checkpoint)."""
    path = Path(path)
    if path.is_file() or is_complete(path) or (path / STATE_FILE).is_file():
        return path
    found = list_checkpoints(path)
    if not found:
        raise ResourceError(
            f"no checkpoint at {path}: give <output>/checkpoints/step-N (train with --save-every N)"
        )
    return found[-1]


def checkpoint_format(path: Path) -> str:
    """``"accelerate"`` or ``"state"`` (see the module docstring)."""
    return str((read_meta(path) or {}).get("format", "state"))


# ---------------------------------------------------------------------------------------------- manifest
def _digest(path: Path, sync: bool = False) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
        if sync:
            os.fsync(fh.fileno())
    return h.hexdigest()


def manifest(folder: Path) -> dict[str, dict[str, Any]]:
    """Size and sha256 of every file in ``folder`` but ``meta.json``, each flushed to disk (fsync)."""
    return {
        p.name: {"bytes": p.stat().st_size, "sha256": _digest(p, sync=True)}
        for p in sorted(folder.iterdir())
        if p.name != META_FILE
    }


def _manifest_problem(path: Path, files: dict[str, Any]) -> str | None:
    present = {p.name for p in path.iterdir() if p.name != META_FILE}
    if unlisted := sorted(present - set(files)):
        return f"{unlisted[0]} is not one of the files babelspace wrote there"
    for name, want in files.items():
        file = path / name
        if name not in present:
            return f"{name} is missing"
        if file.stat().st_size != want.get("bytes"):
            return f"{name} has {file.stat().st_size} bytes, not the {want.get('bytes')} written"
        if _digest(file) != want.get("sha256"):
            return f"{name} changed since it was written (sha256 differs)"
    return None


def verify(path: Path) -> None:
    """Check a checkpoint before anything in it is used: every file its manifest lists is there with
    its size and sha256 and nothing else is (:class:`CheckpointMismatch`), and every pickled file
    other than ``state.pt`` reads with ``weights_only=True`` (:class:`UnsafeCheckpointError`).
    A checkpoint without a manifest (``state`` format, or written by hand) has nothing to compare;
    but a ``meta.json`` that is there and unreadable (empty, junk, not an object), or missing beside
    accelerate's files (which only babelspace's manifest vouches for), is a mismatch too."""
    meta = read_meta(path)
    if meta is None and (path / META_FILE).exists():
        raise CheckpointMismatch(
            f"{path}: {META_FILE} is empty or not a JSON object; this is not the checkpoint babelspace "
            "wrote, so it is not loaded"
        )
    if meta is None and any((path / name).exists() for name in (WEIGHTS_FILE, *PART_FILES.values())):
        raise CheckpointMismatch(
            f"{path}: {META_FILE} is missing beside accelerate's files; this is not the checkpoint "
            "babelspace wrote, so it is not loaded"
        )
    files = (meta or {}).get("files")
    if isinstance(files, dict):
        problem = _manifest_problem(path, files)
        if problem is not None:
            raise CheckpointMismatch(
                f"{path}: {problem}; this is not the checkpoint babelspace wrote, so it is not loaded"
            )
    for file in sorted(path.iterdir()):
        if file.name in PART_FILES.values() or _RNG_FILES.match(file.name):
            _torch_read(file, mmap=True, numpy=bool(_RNG_FILES.match(file.name)))


# ---------------------------------------------------------------------------------------------- safe reads
def is_unsafe_pickle(exc: Exception) -> bool:
    """True when ``weights_only`` refused the file because it names a non-allow-listed global
    (code), as opposed to bytes that are merely damaged."""
    return isinstance(exc, pickle.UnpicklingError) and "unsupported global" in str(exc).lower()


def unsafe_error(file: Path, exc: Exception) -> UnsafeCheckpointError:
    """One line for a file that ``weights_only`` refused because it names Python code."""
    found = re.search(r"GLOBAL (\S+)", str(exc))
    what = f"it names {found.group(1)}" if found else "a non-allow-listed global"
    return UnsafeCheckpointError(
        f"{file}: refusing to load a checkpoint that holds Python objects other than tensors and plain "
        f"values ({what}); loading it could run code. Delete it if you did not write it, or start a "
        "fresh run in a new --out"
    )


def _pickle_globals(file: Path) -> list[str]:
    """The Python callables a file that is not torch's zip format names, read from its pickle
    opcodes (``pickletools.genops`` decodes them and runs nothing); ``[]`` for a zip file, or bytes
    that are no pickle."""
    if zipfile.is_zipfile(file):
        return []
    names: list[str] = []
    strings: list[str] = []
    with contextlib.suppress(Exception), open(file, "rb") as fh:  # damaged bytes: what was read so far
        for op, arg, _ in pickletools.genops(fh):
            if op.name in ("GLOBAL", "INST"):
                names.append(str(arg).replace(" ", "."))
            elif op.name == "STACK_GLOBAL":
                names.append(".".join(strings[-2:]))
            elif isinstance(arg, str):
                strings.append(arg)
    return names


def _torch_read(file: Path, mmap: bool = False, numpy: bool = False) -> Any:
    """``torch.load(file, weights_only=True)``; ``numpy`` also allows what a NumPy random state is
    pickled with. Raises :class:`UnsafeCheckpointError` for a file that names code; other read
    errors propagate."""
    # a plain pickle (weights_only may not even parse it, and would warn at length): refused here
    # when it names anything torch's allow-list could not accept; the rest is left to that list
    deferred = ("torch.", "collections.OrderedDict", *(("numpy.", "_codecs.") if numpy else ()))
    named = [n for n in _pickle_globals(file) if not n.startswith(deferred)]
    if named:
        raise UnsafeCheckpointError(
            f"{file}: refusing to load a checkpoint that holds Python objects other than tensors and "
            f"plain values (it names {named[0]}); loading it could run code. Delete it if you did not "
            "write it, or start a fresh run in a new --out"
        )
    previous = torch.serialization.get_safe_globals()
    try:
        if numpy:
            torch.serialization.add_safe_globals(_NUMPY_GLOBALS)
        return torch.load(file, map_location="cpu", weights_only=True, mmap=mmap)
    except pickle.UnpicklingError as exc:
        if is_unsafe_pickle(exc):
            raise unsafe_error(file, exc) from None
        raise
    finally:
        if numpy:
            torch.serialization.clear_safe_globals()
            torch.serialization.add_safe_globals(previous)


def read_state(path: Path) -> dict[str, Any]:
    """A checkpoint's ``state.pt`` (``path`` is the folder or the file), read with
    ``weights_only=True``: :class:`UnsafeCheckpointError` if it holds anything beyond tensors and
    plain containers; other read errors propagate unchanged."""
    file = Path(path) if Path(path).is_file() else Path(path) / STATE_FILE
    state = _torch_read(file)
    if not isinstance(state, dict):
        raise UnsafeCheckpointError(f"{file}: not a babelspace checkpoint (no state dict)")
    return state


def read_weights(path: Path, state: dict[str, Any] | None = None) -> dict[str, torch.Tensor]:
    """The objective's state dict (student and heads) of a checkpoint folder or ``state.pt``:
    ``model.safetensors`` with its tied names put back (accelerate format), else ``state.pt``'s
    ``objective``. ``state``: ``state.pt`` already read."""
    path = Path(path)
    if path.name == STATE_FILE and path.is_file() and checkpoint_format(path.parent) == "accelerate":
        path = path.parent  # the state.pt of an accelerate-format folder: the weights are beside it
    if path.is_dir() and checkpoint_format(path) == "accelerate":
        from safetensors.torch import load_file

        weights = load_file(path / WEIGHTS_FILE, device="cpu")
        for group in (read_meta(path) or {}).get("tied", []):
            kept = next(n for n in group if n in weights)
            weights.update({n: weights[kept] for n in group})
        return weights
    objective = (state if state is not None else read_state(path)).get("objective")
    if not isinstance(objective, dict):
        raise ResourceError(f"{path} is not a babelspace training checkpoint (no objective state)")
    return objective


def read_all(path: Path) -> dict[str, Any]:
    """A whole checkpoint as one dict, whatever its format: ``state.pt``'s run state with the
    ``objective``, ``optimizer``, ``scheduler`` and ``scaler`` states (for inspection and tests;
    a resumed run restores the accelerate files through ``Accelerator.load_state``)."""
    state = read_state(path)
    if checkpoint_format(path) != "accelerate":
        return state
    state["objective"] = read_weights(path)
    for key, name in PART_FILES.items():
        state[key] = _torch_read(path / name) if (path / name).is_file() else None
    return state
