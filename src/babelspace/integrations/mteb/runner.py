"""Chosen MTEB tasks run on a sentence-transformers model through MTEB's own ``mteb.evaluate``.

:func:`run_mteb` loads every task's data from its local copy first
(:func:`babelspace.integrations.mteb.local_data.load_task`), then the model with its saved prompts
(:func:`babelspace.models.encoder.load_encoder`, wrapped in MTEB's ``SentenceTransformerEncoderWrapper``
as ``mteb.evaluate`` wraps a ``SentenceTransformer``), and writes MTEB's own result files
(``TaskResult`` JSON, ``model_meta.json``, ``run_settings.jsonl``) with its ``ResultCache`` under
``OUT/results/ORG__NAME/REVISION/``. The revision is the model folder's content hash, so a model
retrained in place gets new files. Only offline: the Hub is never asked (``HF_HUB_OFFLINE`` must be set
before huggingface_hub is imported; the CLI sets it).
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from babelspace.errors import ResourceError, first_error_line
from babelspace.integrations.mteb.local_data import TaskSource, load_task

__all__ = ["MtebRun", "mteb_name_and_revision", "run_mteb"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class MtebRun:
    """What :func:`run_mteb` did: MTEB's ``TaskResult`` per task and where each was written."""

    model_name: str
    revision: str
    results: list[Any]  # mteb.TaskResult
    files: list[Path]


def _require_offline() -> None:
    from datasets import config as datasets_config
    from huggingface_hub import constants

    if not (constants.HF_HUB_OFFLINE and datasets_config.HF_HUB_OFFLINE):
        raise ResourceError(
            "MTEB tasks run here offline only: set HF_HUB_OFFLINE=1 before Python starts "
            "(`babelspace mteb` sets it itself)"
        )


def mteb_name_and_revision(spec: str, model_name: str | None = None) -> tuple[str, str]:
    """MTEB's ``ORG/NAME`` and revision of the model ``spec``: ``model_name``, else ``local/FOLDER``
    for a local folder (a Hub id names itself); the revision is a local folder's content hash
    (:func:`babelspace.models.identity.model_identity`)."""
    from babelspace.models.identity import model_identity

    ident = model_identity(spec)
    if ident.folder is None or ident.content_hash is None:
        return model_name or spec, "no_revision_available"
    return model_name or f"local/{ident.folder.resolve().name}", ident.content_hash[:16]


def _evaluate(wrapper: Any, task: Any, cache: Any, encode_kwargs: dict, progress: bool) -> Any:  # noqa: ANN401
    import mteb

    try:
        result = mteb.evaluate(
            wrapper,
            task,
            cache=cache,
            overwrite_strategy="always",
            co2_tracker=False,
            encode_kwargs=dict(encode_kwargs),
            show_progress_bar=progress,
        )
    except (KeyError, ValueError, TypeError, IndexError) as exc:  # data without the task's columns
        where = task.metadata.dataset["path"]
        raise ResourceError(
            f"{task.metadata.name}: MTEB cannot evaluate the data in {where}: {first_error_line(exc, with_type=True)} "
            "(is it a copy of the task's dataset?)"
        ) from None
    if result.exceptions:
        raise ResourceError(f"{task.metadata.name}: {result.exceptions[0].exception}")
    return result.task_results[0]


def run_mteb(  # noqa: PLR0913 - the command's flags
    model: str,
    sources: Sequence[TaskSource],
    out: str | Path,
    *,
    languages: Sequence[str] | None = None,
    device: str | None = None,
    batch_size: int = 32,
    max_seq_length: int | None = None,
    model_name: str | None = None,
    progress: bool = True,
) -> MtebRun:
    """Run the MTEB tasks of ``sources`` on ``model`` from their local data; MTEB's result files go
    under ``out``. Every task's data is loaded (and its errors raised) before the model is."""
    _require_offline()
    import mteb
    from mteb.models.sentence_transformer_wrapper import SentenceTransformerEncoderWrapper

    from babelspace.models.encoder import load_encoder

    tasks = [load_task(s, languages) for s in sources]
    name, revision = mteb_name_and_revision(model, model_name)
    encoder = load_encoder(model, device, max_seq_length)
    with warnings.catch_warnings():  # mteb 2.26 warns about its own and sentence-transformers' renames
        warnings.filterwarnings("ignore", "The `get_sentence_embedding_dimension`", FutureWarning)
        warnings.filterwarnings("ignore", "The fill_missing parameter is deprecated", DeprecationWarning)
        wrapper = SentenceTransformerEncoderWrapper(encoder)
    meta = wrapper.mteb_model_meta.model_copy(update={"name": name, "revision": revision})
    wrapper.mteb_model_meta = meta
    cache = mteb.ResultCache(Path(out))
    encode_kwargs = {"batch_size": batch_size, "show_progress_bar": progress}
    results, files = [], []
    for task in tasks:
        results.append(_evaluate(wrapper, task, cache, encode_kwargs, progress))
        files.append(cache.get_task_result_path(task.metadata.name, meta))
        task.unload_data()
    return MtebRun(name, revision, results, files)
