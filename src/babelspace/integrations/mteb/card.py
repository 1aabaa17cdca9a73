"""MTEB results written into a saved model's card (``babelspace mteb --update-card``).

The entries are MTEB's own: ``TaskResult.get_hf_eval_results()`` makes one huggingface_hub
``EvalResult`` per split and subset (task type, the dataset's Hub id, config, split and revision, the
task's main score, source MTEB), and huggingface_hub writes them as ``model-index`` entries. MTEB 2.26
marks that method deprecated in favour of the Hub's ``.eval_results/`` files, which it only uploads
(``ModelMeta.push_eval_results``); its card generator (``mteb create-model-results``) adds only the
``mteb`` tag and a benchmark table. The card's other entries (babelspace's own held-out task), its
metadata and its text are kept (:func:`babelspace.training.output.card_results.add_card_results`);
the card is replaced atomically.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from babelspace.errors import ResourceError
from babelspace.training.output.card_results import add_card_results
from babelspace.writable import atomic_write_text

__all__ = ["card_path", "mteb_card_entries", "update_card"]


def card_path(model: str) -> Path:
    """The README.md card of the model folder ``model`` (refused when there is none)."""
    readme = Path(model).expanduser() / "README.md"
    if not Path(model).expanduser().is_dir():
        raise ResourceError(
            f"--update-card: MODEL {model} is not a local folder, so it has no card to update"
        )
    if not readme.is_file():
        raise ResourceError(f"--update-card: {model} has no README.md card to update")
    return readme


def mteb_card_entries(results: Sequence[Any]) -> list[Any]:  # mteb.TaskResult -> huggingface_hub.EvalResult
    """MTEB's model-index entries of ``results``, one per split and subset."""
    entries = []
    with warnings.catch_warnings():  # deprecated in mteb 2.26, still its card format
        warnings.simplefilter("ignore", DeprecationWarning)
        for result in results:
            entries += result.get_hf_eval_results()
    return entries


def update_card(readme: str | Path, results: Sequence[Any], model_name: str) -> Path:
    """Put MTEB's entries of ``results`` and the ``mteb`` tag into the card ``readme``; returns it.
    ``model_name`` names the model-index when the card has none."""
    readme = Path(readme)
    text = add_card_results(
        readme.read_text(encoding="utf-8"), mteb_card_entries(results), tags=["mteb"], model_name=model_name
    )
    return atomic_write_text(readme, text)
