"""An MTEB task pointed at a local copy of its Hugging Face dataset and loaded from it, offline.

MTEB 2 loads a task's data with ``datasets.load_dataset(**task.metadata.dataset)`` (the dataset's
Hub id and pinned revision; ``name=SUBSET`` per subset of a multilingual task). :func:`load_task`
gives the task a copy of its metadata whose ``path`` is the local folder of the dataset repository's
files, so the same call reads that folder and nothing is asked of the Hub. The folder is the one
``hf download REPO --repo-type dataset --revision REV --local-dir DIR`` writes, or a Hugging Face hub
cache holding that revision (``hf download`` without ``--local-dir``; the default when no folder is
given). A missing copy, a ``save_to_disk`` folder, unreadable files and subsets or splits the copy
lacks are each one :class:`~babelspace.errors.ResourceError` line saying what to download and where.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from babelspace.errors import ResourceError, first_error_line

__all__ = ["TaskSource", "dataset_folder", "download_command", "load_task", "missing_parts"]

logger = logging.getLogger(__name__)

#: What ``Dataset(Dict).save_to_disk`` writes at the top of its folder.
_SAVE_TO_DISK_MARKS = ("dataset_dict.json", "state.json")


@dataclass(frozen=True)
class TaskSource:
    """One ``--task NAME[=DIR]``: an MTEB task name and the local copy of its data (``None``: the
    Hugging Face hub cache)."""

    name: str
    data: Path | None = None


def _repo(task: Any) -> tuple[str, str | None]:  # noqa: ANN401 - an mteb AbsTask (imported lazily)
    meta = task.metadata.dataset
    return str(meta["path"]), meta.get("revision")


def download_command(task: Any, where: Path | None) -> str:  # noqa: ANN401 - an mteb AbsTask
    """The ``hf download`` command that fetches ``task``'s dataset at MTEB's pinned revision."""
    repo, revision = _repo(task)
    cmd = f"hf download {repo} --repo-type dataset"
    if revision:
        cmd += f" --revision {revision}"
    return cmd + (f" --local-dir {where}" if where is not None else "")


def _missing(task: Any, where: Path | None, what: str) -> ResourceError:  # noqa: ANN401
    target = "copy that folder to" if where is not None else "copy the hub cache to this machine, or give"
    place = str(where) if where is not None else f"--task {task.metadata.name}=DIR"
    return ResourceError(
        f"{task.metadata.name}: {what}; on a machine with Hub access run `{download_command(task, where)}` "
        f"and {target} {place}"
    )


def _hub_snapshot(root: Path, task: Any) -> Path | None:  # noqa: ANN401
    """The snapshot of ``task``'s pinned revision in the hub cache ``root`` (or ``root/hub``), or
    ``None`` when the cache has no copy of the dataset at all."""
    repo, revision = _repo(task)
    for cache in (root, root / "hub"):
        repo_dir = cache / ("datasets--" + repo.replace("/", "--"))
        if not repo_dir.is_dir():
            continue
        ref = repo_dir / "refs" / "main"
        rev = revision or (ref.read_text(encoding="utf-8").strip() if ref.is_file() else "")
        snapshot = repo_dir / "snapshots" / rev
        if rev and snapshot.is_dir():
            return snapshot
        have = sorted(p.name for p in (repo_dir / "snapshots").glob("*")) or ["none"]
        raise _missing(
            task,
            None,
            f"the hub cache {cache} has {repo} at revision(s) {', '.join(have)}, not {rev or 'main'}",
        )
    return None


def dataset_folder(task: Any, data: Path | None) -> Path:  # noqa: ANN401 - an mteb AbsTask
    """The folder of ``task``'s dataset repository files: ``data`` itself, or the snapshot of MTEB's
    pinned revision when ``data`` (default: huggingface_hub's cache) is a hub cache."""
    from huggingface_hub.constants import HF_HUB_CACHE

    repo, _ = _repo(task)
    if data is not None and not data.exists():
        raise _missing(task, data, f"no local copy of its data ({repo}) at {data}")
    if data is not None and not data.is_dir():
        raise ResourceError(f"{task.metadata.name}: {data} is a file; give the folder of {repo}'s files")
    if data is not None and any((data / mark).is_file() for mark in _SAVE_TO_DISK_MARKS):
        raise ResourceError(
            f"{task.metadata.name}: {data} is a `save_to_disk` folder, which MTEB's loader "
            f"(`datasets.load_dataset`) cannot read; give the folder of the dataset repository's files "
            f"(`{download_command(task, data)}`)"
        )
    root = data if data is not None else Path(HF_HUB_CACHE)
    snapshot = _hub_snapshot(root, task)
    if snapshot is not None:
        return snapshot
    if data is None:
        raise _missing(task, None, f"{repo} is not in the Hugging Face hub cache {root}")
    return data


def missing_parts(task: Any) -> list[str]:  # noqa: ANN401 - an mteb AbsTask with its data loaded
    """The ``SUBSET`` or ``SUBSET/SPLIT`` names MTEB will evaluate that the loaded data lacks."""
    dataset = task.dataset
    parts = (
        {sub: dataset.get(sub) for sub in task.hf_subsets}
        if task.metadata.is_multilingual
        else {"default": dataset}
    )
    missing = []
    for sub, data in parts.items():
        if data is None:
            missing.append(sub)
        elif isinstance(data, Mapping):
            missing += [f"{sub}/{split}" for split in task.eval_splits if split not in data]
    return missing


def load_task(source: TaskSource, languages: Sequence[str] | None = None) -> Any:  # noqa: ANN401
    """MTEB's task ``source.name`` (its subsets cut to ``languages``, ISO 639-3 codes, when given)
    with its data loaded from the local copy :func:`dataset_folder` finds."""
    import mteb
    from datasets.exceptions import DatasetsError

    try:
        task = mteb.get_task(source.name, languages=list(languages) if languages else None)
    except KeyError as exc:
        why = str(exc.args[0] if exc.args else exc).removeprefix("KeyError: ")
        raise ResourceError(f"--task {source.name}: {why}") from None
    except ValueError as exc:  # a language code mteb does not know
        raise ResourceError(f"--task {source.name}: {first_error_line(exc)}") from None
    if not task.hf_subsets:
        raise ResourceError(f"--task {source.name}: no subset in --languages {','.join(languages or [])}")
    folder = dataset_folder(task, source.data)
    expected, fetch = download_command(task, None), download_command(task, source.data)
    task.metadata = task.metadata.model_copy(
        update={"dataset": {**task.metadata.dataset, "path": str(folder)}}
    )
    logger.info("%s: data from %s", source.name, folder)
    try:
        task.load_data()
    except (OSError, ValueError, KeyError, TypeError, DatasetsError) as exc:
        raise ResourceError(
            f"{source.name}: cannot load its data from {folder}: {first_error_line(exc, with_type=True)} "
            f"(expected the files of `{expected}`)"
        ) from None
    missing = missing_parts(task)
    if missing:
        raise ResourceError(
            f"{source.name}: the data in {folder} lacks {', '.join(missing[:8])}"
            + (f" and {len(missing) - 8} more" if len(missing) > 8 else "")
            + " (cut the task to the languages you have with --languages, or download the whole dataset: "
            f"`{fetch}`)"
        )
    return task
