"""Publishing a saved model to the Hugging Face Hub (``babelspace push``, ``train --push-to-hub``).

:func:`push_model` renders the folder's model card for the Hub repository (its model id, title,
model-index name and usage snippet: :func:`babelspace.training.output.model_card.card_for_hub`),
creates the repository (kept if it exists) and uploads the folder and that card in one commit with
``huggingface_hub``'s ``create_repo`` and ``create_commit``. Checkpoints and logs of the run stay local
(:data:`LOCAL_ONLY`). The local README.md is rewritten to the uploaded card only once the upload
has succeeded; a Hub that cannot be reached or refuses the upload is one :class:`HubError` line.
"""

from __future__ import annotations

import logging
from pathlib import Path

from babelspace.errors import first_error_line
from babelspace.hub import HubError, check_push_ready
from babelspace.writable import atomic_write_text

__all__ = ["LOCAL_ONLY", "push_model"]

logger = logging.getLogger(__name__)

#: Files of a training output that are not part of the published model.
LOCAL_ONLY = ["checkpoints/**", "train.log", ".babelspace-*", "*.tmp", ".*.tmp-*"]


def _upload_errors() -> tuple[type[BaseException], ...]:
    """What a failed upload raises: huggingface_hub's HTTP errors, OS-level network errors and the
    HTTP client's own errors (a refused connection is an ``httpx`` ``ConnectError``, which is neither)."""
    from huggingface_hub.errors import HfHubHTTPError

    client = tuple(c for c in HfHubHTTPError.__mro__ if c.__name__ == "HTTPError")
    return (HfHubHTTPError, OSError, *client)


def _operations(folder: Path, card: str) -> list:
    """One ``CommitOperationAdd`` per file of ``folder`` outside :data:`LOCAL_ONLY`, README.md
    replaced by ``card``."""
    from huggingface_hub import CommitOperationAdd
    from huggingface_hub.utils import filter_repo_objects

    files = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())
    kept = filter_repo_objects(files, ignore_patterns=[*LOCAL_ONLY, "README.md"])
    ops = [CommitOperationAdd(path_in_repo=rel, path_or_fileobj=str(folder / rel)) for rel in kept]
    return [*ops, CommitOperationAdd(path_in_repo="README.md", path_or_fileobj=card.encode("utf-8"))]


def push_model(folder: str | Path, repo_id: str, *, private: bool = False) -> str:
    """Upload ``folder`` (without its checkpoints and logs) to ``repo_id`` with a card naming the
    repository, creating the repository if it is new; then write that card to ``folder/README.md``.
    Returns the repository URL. Raises :class:`HubError` (one line) when the Hub cannot be reached
    or refuses; the local folder is then unchanged."""
    from huggingface_hub import HfApi

    from babelspace.training.output.model_card import card_for_hub

    folder = Path(folder)
    if not (folder / "modules.json").is_file() and not (folder / "config.json").is_file():
        raise HubError(f"{folder}: not a saved model folder (no modules.json or config.json)")
    check_push_ready("push to the Hub")
    card = card_for_hub(folder, repo_id)
    api = HfApi()
    try:
        url = api.create_repo(repo_id, private=private, exist_ok=True, repo_type="model")
        api.create_commit(
            repo_id=repo_id,
            operations=_operations(folder, card),
            commit_message=f"babelspace: upload {folder.name}",
            repo_type="model",
        )
    except _upload_errors() as exc:
        raise HubError(
            f"push to {repo_id} failed ({first_error_line(exc, with_type=True)}); nothing was published and {folder} is "
            f"unchanged: retry with 'babelspace push {folder} {repo_id}'"
        ) from None
    readme = folder / "README.md"
    atomic_write_text(readme, card)
    logger.info("uploaded %s to %s", folder, url)
    return str(url)
