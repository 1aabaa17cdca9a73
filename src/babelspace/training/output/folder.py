"""The training output folder: refuse to clobber what is not ours, check writability before any
work, and swap an exported model into place as a whole.

``--out`` holds the exported sentence-transformers model, ``babelspace_training.json`` (the run
log), ``babelspace_best.json``, ``checkpoints/`` and, with ``--report-to``, ``runs/`` (the tracker's
local files). :func:`prepare_output` runs before any work:

- a regular file, a folder that cannot be written, or one whose parent cannot be written (the
  export is built beside it and renamed in) is refused with one line naming the folder;
- a non-empty folder that is not a babelspace output (no marker file, no ``checkpoints/``) is
  refused whatever the flags: the user's files there are never overwritten or deleted;
- a previous babelspace output is only reused with ``--resume`` (continue its run; refused when it
  holds no checkpoint, so a finished model is never replaced by an untrained one) or
  ``--overwrite`` (its checkpoints, run log and ``runs/`` are removed; its model is replaced at
  export);
- a symlinked ``--out`` is followed: the export goes into the link's target, the link stays.

The caller holds :func:`babelspace.training.output.lock.output_lock` around all of this, so two runs
never share a folder.

:func:`export_model_atomically` writes the model into a sibling temporary folder (with
``babelspace_files.json``, the list of what babelspace wrote there), moves the old folder's
``checkpoints/``, run log and the user's own files (everything babelspace did not write, such as
``notes.txt`` or an ``eval.json`` report) into it, and exchanges the two folders in one
``renameat2(RENAME_EXCHANGE)`` call (two renames where the filesystem lacks it), so a kill at any
moment leaves either the complete old or the complete new model at ``--out``;
:func:`recover_interrupted_export` puts checkpoints and the user's files back from a temporary
folder a kill left behind.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import json
import logging
import os
import re
import shutil
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from babelspace.checkpoints.checkpoint import checkpoint_runs, resume_note
from babelspace.data.mix import local_paths
from babelspace.disk import failure_reason, space_message
from babelspace.errors import TrainingError
from babelspace.training.config import TrainConfig
from babelspace.writable import PROBE_PREFIX, check_output_apart, dangling_link, write_error, write_json

logger = logging.getLogger(__name__)

MARKERS = ("babelspace_training.json", "babelspace_best.json", "checkpoints")
# What belongs to the run rather than to one exported model: kept across exports.
KEEP = ("checkpoints", "babelspace_training.json", "train.log", "runs")
# What an export wrote into its folder (top-level names): replaced by the next export.
MANIFEST = "babelspace_files.json"
# What babelspace writes or derives from a model (outputs older than MANIFEST, ``babelspace export``
# in place): replaced by the next export too, so no stale weights or tokenizer mix with the new.
_MODEL_NAMES = re.compile(
    r"\d+_\w+|onnx|openvino|README\.md|modules\.json|config(_sentence_transformers)?\.json"
    r"|sentence_bert_config\.json|(model|pytorch_model)\..*|tokenizer(_config)?\.json|vocab\..*"
    r"|special_tokens_map\.json|added_tokens\.json|merges\.txt|.*\.model|babelspace_.*"
)
_CREATED: dict[Path, list[Path]] = {}  # output -> folders prepare_output created (outermost first)


def is_babelspace_output(folder: Path) -> bool:
    return any((Path(folder) / m).exists() for m in MARKERS)


def _probe(folder: Path, what: str) -> None:
    exc = write_error(folder)
    if exc is not None:
        raise TrainingError(
            f"--out {what} {folder} is not writable ({exc.strerror}); choose another --out"
        ) from None


def _make_folder(output: Path) -> None:
    missing = []
    for p in [output, *output.parents]:
        if p.exists():
            break
        missing.append(p)
    try:
        output.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise TrainingError(
            f"--out {output} is not writable: it cannot be created ({exc.strerror}); choose another --out"
        ) from None
    _CREATED[output.resolve()] = list(reversed(missing))


def _check_contents(output: Path, *, resume: bool, overwrite: bool) -> None:
    entries = sorted(p.name for p in output.iterdir() if not p.name.startswith(PROBE_PREFIX))
    if not entries:
        return
    if not is_babelspace_output(output):
        shown = ", ".join(entries[:4]) + (" ..." if len(entries) > 4 else "")
        raise TrainingError(
            f"--out {output} is a non-empty folder that is not a babelspace output (holds {shown}); "
            "refusing to overwrite it: choose a new or empty folder"
        )
    if resume:
        if not checkpoint_runs(output):
            raise TrainingError(no_checkpoint_message(output))
        return
    if not overwrite:
        runs = checkpoint_runs(output)
        what = (
            "checkpoints of an earlier run ("
            + ", ".join(f"run {r or '?'} up to step {s}" for r, s in runs.items())
            + ")"
            if runs
            else "an earlier babelspace model"
        )
        raise TrainingError(
            f"--out {output} holds {what}; pass --resume to continue it, --overwrite to replace it, "
            "or choose another --out"
        )
    for name in ("checkpoints", "babelspace_training.json", "runs"):
        target = output / name
        if target.is_dir():
            shutil.rmtree(target)
        elif target.exists():
            target.unlink()
    logger.warning("--overwrite: removed the earlier run's checkpoints, log and runs/ from %s", output)


def no_checkpoint_message(output: Path) -> str:
    return (
        f"--resume: no checkpoint in {output}; without --resume a new run needs --overwrite (which "
        "replaces the model there) or another --out"
    )


def check_output_apart_from_inputs(cfg: TrainConfig) -> None:
    """Refuse, before any work, an ``--out`` that is, holds or lies inside a ``--data`` input or
    the ``--teacher``/``--student`` folder, or is a dangling symbolic link."""
    models = [("--teacher", cfg.teacher), ("--student", cfg.student)]
    inputs = [("--data", str(p)) for p in local_paths(cfg.data)]
    check_output_apart(cfg.output, "--out", inputs=inputs, models=models, folder=True)


def prepare_output(output: Path, *, resume: bool, overwrite: bool) -> None:
    """Validate ``--out`` before any work (see the module docstring); creates it if missing.

    Raises :class:`TrainingError` with one line naming the folder and what to do."""
    output = Path(output)
    target = dangling_link(output)
    if target is not None:
        raise TrainingError(
            f"--out {output} is a dangling symbolic link: it points to {target}, which does not "
            "exist; create that folder or remove the link, or choose another --out"
        )
    recover_interrupted_export(output)
    if output.exists() and not output.is_dir():
        raise TrainingError(f"--out {output} is a file, not a folder; choose a folder path for --out")
    if not output.exists():
        _make_folder(output)
    else:
        _check_contents(output, resume=resume, overwrite=overwrite)
    _probe(output, "folder")
    _probe(output.resolve().parent, "parent folder")


def interrupted_note(output: Path) -> str:
    """What an interrupted run left at ``output``, and how to go on from it."""
    output = Path(output)
    if not output.exists():
        return f"nothing was written to {output}"
    if checkpoint_runs(output):
        return resume_note(output)
    if is_babelspace_output(output):
        return f"{output} holds the model of the last dev check; " + resume_note(output)
    return f"nothing was written to {output}"


def cleanup_failed_output(output: Path) -> None:
    """After a failed run: remove the folders :func:`prepare_output` created if they are empty."""
    for folder in reversed(_CREATED.pop(Path(output).resolve(), [])):
        try:
            folder.rmdir()  # only succeeds when empty
        except OSError:
            break


def _exchange(a: Path, b: Path) -> bool:
    """Atomically swap two paths with ``renameat2(RENAME_EXCHANGE)``; False if unsupported."""
    libc_name = ctypes.util.find_library("c")
    if not libc_name:
        return False
    libc = ctypes.CDLL(libc_name, use_errno=True)
    if not hasattr(libc, "renameat2"):
        return False
    at_fdcwd, rename_exchange = -100, 2
    rc = libc.renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange)
    return rc == 0


def _swap_in(new: Path, output: Path) -> None:
    """Put ``new`` at ``output``; the old folder ends at ``new``'s path (or is gone)."""
    if not output.exists():
        os.replace(new, output)
        return
    if _exchange(new, output):
        return
    aside = output.with_name(f".{output.name}.old-{uuid.uuid4().hex[:8]}")
    os.replace(output, aside)  # a kill here: recover_interrupted_export renames it back
    os.replace(new, output)
    os.replace(aside, new)


def _real(output: Path) -> Path:
    """The folder an export writes: a symlinked ``--out`` is followed (the link stays a link)."""
    return output.resolve() if output.is_symlink() else output


def export_model_atomically(
    save_fn: Callable[[Path], None], output: Path, info: dict[str, Any], needed_bytes: int | None = None
) -> None:
    """Write a model with ``save_fn(folder)`` and swap it into ``output`` as a whole.

    ``info`` is written as ``babelspace_best.json``. The old folder's checkpoints and run log are
    moved into the new one before the swap; everything else of the old folder is deleted after.
    Whatever stops it before the swap (a full disk, Ctrl-C) puts them back and removes the temporary
    folder; a failed write raises :class:`TrainingError` saying how much space the model needs
    (``needed_bytes``) and how much the disk has."""
    output = _real(Path(output))
    new = output.with_name(f".{output.name}.new-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    try:
        save_fn(new)
        write_json(new / "babelspace_best.json", info)
        written = sorted({p.name for p in new.iterdir()} | {MANIFEST})
        write_json(new / MANIFEST, {"written": written})
        for name in _carried(output, new):
            os.replace(output / name, new / name)
        _swap_in(new, output)
    except BaseException as exc:
        _undo_export(new, output)
        from babelspace.training.batches import dead_worker

        if dead_worker(exc) is not None:  # a loader worker died during the save: the trainer says so
            raise
        if isinstance(exc, (OSError, RuntimeError)) or type(exc).__name__ == "SafetensorError":
            raise TrainingError(
                f"could not save the model to {output} ({failure_reason(exc, output.parent, needed_bytes)}): {space_message(output, needed_bytes)}; "
                "free space or choose another --out"
            ) from exc
        raise
    finally:
        if not _carried(new, None):
            shutil.rmtree(new, ignore_errors=True)  # after a swap: the old model


def _written(folder: Path) -> set[str]:
    """The top-level names babelspace wrote into ``folder`` (its manifest)."""
    try:
        return set(json.loads((folder / MANIFEST).read_text()).get("written", []))
    except (OSError, ValueError, AttributeError):
        return set()


def _carried(old: Path, new: Path | None) -> list[str]:
    """What of ``old`` goes on into the next model folder ``new``: the run's files (`KEEP`) and
    every name babelspace did not write there (the user's), unless ``new`` already has it."""
    if not old.is_dir():
        return []
    written = _written(old)
    names = []
    for entry in sorted(old.iterdir()):
        name = entry.name
        if name.startswith(PROBE_PREFIX) or (new is not None and (new / name).exists()):
            continue
        if name in KEEP or (name not in written and not _MODEL_NAMES.fullmatch(name)):
            names.append(name)
    return names


def _undo_export(new: Path, output: Path) -> None:
    """Put back what an export stopped before or during its swap had moved: the old folder set
    aside (two-rename fallback) and the checkpoints and run log moved into ``new``."""
    if not output.exists():
        for aside in sorted(output.parent.glob(f".{output.name}.old-*")):
            os.replace(aside, output)
            break
    _restore_kept(new, output)


def _restore_kept(temp: Path, output: Path) -> None:
    """Move the run's and the user's files an export had carried into ``temp`` back to ``output``."""
    if not output.is_dir():
        return
    for name in _carried(temp, output):
        os.replace(temp / name, output / name)


def recover_interrupted_export(output: Path) -> None:
    """Undo what a kill during :func:`export_model_atomically` left: an old folder set aside
    with nothing at ``output`` is renamed back; checkpoints and run log in a temporary folder are
    moved back into ``output``; the temporary folders are removed."""
    output = _real(Path(output))
    parent = output.parent
    if not parent.is_dir():
        return
    for aside in sorted(parent.glob(f".{output.name}.old-*")):
        if not output.exists():
            logger.warning("restoring %s from %s (an export was interrupted)", output, aside)
            os.replace(aside, output)
        else:
            _restore_kept(aside, output)
            shutil.rmtree(aside, ignore_errors=True)
    for temp in sorted(parent.glob(f".{output.name}.new-*")):
        if output.is_dir():
            _restore_kept(temp, output)
        logger.warning("removing %s (an export was interrupted)", temp)
        shutil.rmtree(temp, ignore_errors=True)
