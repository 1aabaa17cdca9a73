"""Publishing a saved model to the Hugging Face Hub (``babelspace push``, ``train --push-to-hub``).

:func:`push_model` rewrites the folder's model card so its model id, title, model-index name and usage
snippet name the Hub repository (:func:`babelspace.training.output.model_card.card_for_hub`), creates the
repository (kept if it exists) and uploads the folder with ``huggingface_hub``'s ``create_repo`` and
``upload_folder``. Checkpoints and logs of the run stay local (:data:`LOCAL_ONLY`).
"""

from __future__ import annotations

import logging
from pathlib import Path

from babelspace.hub import HubError, check_push_ready

__all__ = ["LOCAL_ONLY", "push_model"]

logger = logging.getLogger(__name__)

#: Files of a training output that are not part of the published model.
LOCAL_ONLY = ["checkpoints/**", "train.log", ".babelspace-*", "*.tmp"]


def push_model(folder: str | Path, repo_id: str, *, private: bool = False) -> str:
    """Rewrite ``folder``'s model card for ``repo_id``, create the repository (kept if it exists) and
    upload the folder without its checkpoints and logs. Returns the repository URL."""
    from huggingface_hub import HfApi
    from huggingface_hub.errors import HfHubHTTPError

    from babelspace.training.output.model_card import card_for_hub

    folder = Path(folder)
    if not (folder / "modules.json").is_file() and not (folder / "config.json").is_file():
        raise HubError(f"{folder}: not a saved model folder (no modules.json or config.json)")
    check_push_ready("push to the Hub")
    card_for_hub(folder, repo_id)
    api = HfApi()
    try:
        url = api.create_repo(repo_id, private=private, exist_ok=True, repo_type="model")
        api.upload_folder(
            repo_id=repo_id,
            folder_path=str(folder),
            repo_type="model",
            commit_message=f"babelspace: upload {folder.name}",
            ignore_patterns=LOCAL_ONLY,
        )
    except HfHubHTTPError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise HubError(f"push to {repo_id} failed: {first}") from None
    logger.info("uploaded %s to %s", folder, url)
    return str(url)
