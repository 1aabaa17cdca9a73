"""Results added to a saved model card's ``model-index``, read and written through huggingface_hub's
public ``ModelCard``/``EvalResult`` API (the card's other metadata and its text are kept as they are).

:func:`add_card_results` puts ``EvalResult`` entries (such as MTEB's) into a card's text, replacing an
earlier entry of the same task, dataset, config, split, revision and metric; :func:`added_results`
reads back the entries that babelspace's own card did not write, so that rendering the card again
(``babelspace push``) keeps them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from huggingface_hub import EvalResult, ModelCard

__all__ = ["AddedResults", "add_card_results", "added_results"]

#: ``(results, tags)``: model-index entries and tags another tool added to a card.
AddedResults = tuple[list[EvalResult], list[str]]


def _key(result: EvalResult) -> tuple:
    return (*result.unique_identifier, result.metric_type)


def add_card_results(
    text: str, results: Sequence[EvalResult], tags: Iterable[str] = (), model_name: str | None = None
) -> str:
    """``text`` (a card with its YAML header) with ``results`` in its ``model-index`` (an entry of
    the same task, dataset, config, split, revision and metric is replaced; every other entry stays)
    and ``tags`` among its tags. ``model_name``: the model-index name when the card has none."""
    card = ModelCard(text)
    data = card.data
    new = {_key(r) for r in results}
    kept = [r for r in data.eval_results or [] if _key(r) not in new]
    data.eval_results = kept + list(results)
    if not data.model_name:
        data.model_name = model_name or "model"
    data.tags = list(dict.fromkeys([*(data.tags or []), *tags]))
    return str(card)


def added_results(readme: str | Path, own_dataset_types: Iterable[str]) -> AddedResults:
    """The ``model-index`` entries of the card ``readme`` whose dataset type is none of
    ``own_dataset_types`` (those babelspace writes itself), and its tags; empty without a card."""
    path = Path(readme)
    if not path.is_file():
        return [], []
    card = ModelCard(path.read_text(encoding="utf-8"))
    own = set(own_dataset_types)
    results = [r for r in card.data.eval_results or [] if r.dataset_type not in own]
    return results, list(card.data.tags or [])
