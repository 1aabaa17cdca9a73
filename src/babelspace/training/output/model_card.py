"""A model card that says what a babelspace student is, through sentence-transformers' own card data.

:func:`fill_model_card` sets the fields of the student's ``SentenceTransformerModelCardData`` before
``student.save(...)`` writes README.md: base model (the student's origin), languages, licence,
training sources with their licences, the teacher, objective and recipe, the ``babelspace train``
command, the held-out table as metrics (the card's ``model-index``) and the papers to cite. Nothing
is looked up on the Hub (``local_files_only``), so it works offline.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from sentence_transformers import SentenceTransformer

from babelspace.errors import BabelspaceError
from babelspace.training.setup.corpora import mix_names

logger = logging.getLogger(__name__)

__all__ = ["CARD_INPUTS", "HUB_IDS", "HeldOutTable", "card_for_hub", "fill_model_card", "update_model_card"]

#: What :func:`update_model_card` rendered the card from (run config, held-out table, command), kept
#: beside README.md so ``babelspace push`` can render it again for a Hub repository.
CARD_INPUTS = "babelspace_card.json"

#: babelspace's named offline models and the Hub models they are copies of.
HUB_IDS = {
    "e5-small": "intfloat/multilingual-e5-small",
    "multilingual-e5-small": "intfloat/multilingual-e5-small",
    "minilm": "sentence-transformers/all-MiniLM-L6-v2",
    "teacher": "sentence-transformers/all-MiniLM-L6-v2",
    "all-minilm-l6-v2": "sentence-transformers/all-MiniLM-L6-v2",
}
_LICENCES = {"intfloat/multilingual-e5-small": "mit", "sentence-transformers/all-MiniLM-L6-v2": "apache-2.0"}

CITATIONS = {
    "Multilingual knowledge distillation (Reimers & Gurevych, 2020)": """@inproceedings{reimers-2020-multilingual-sentence-bert,
    title = "Making Monolingual Sentence Embeddings Multilingual using Knowledge Distillation",
    author = "Reimers, Nils and Gurevych, Iryna",
    booktitle = "Proceedings of the 2020 Conference on Empirical Methods in Natural Language Processing",
    year = "2020",
    url = "https://arxiv.org/abs/2004.09813",
}""",
    "MEXMA (Janeiro et al., 2025)": """@inproceedings{janeiro-2025-mexma,
    title = "MEXMA: Token-level objectives improve sentence representations",
    author = "Janeiro, Jo{\\~a}o Maria and Piwowarski, Benjamin and Gallinari, Patrick and Barrault, Lo{\\"i}c",
    booktitle = "Proceedings of the 63rd Annual Meeting of the Association for Computational Linguistics",
    year = "2025",
    url = "https://arxiv.org/abs/2409.12737",
}""",
    "LaBSE (Feng et al., 2022)": """@inproceedings{feng-2022-labse,
    title = "Language-agnostic {BERT} Sentence Embedding",
    author = "Feng, Fangxiaoyu and Yang, Yinfei and Cer, Daniel and Arivazhagan, Naveen and Wang, Wei",
    booktitle = "Proceedings of the 60th Annual Meeting of the Association for Computational Linguistics",
    year = "2022",
    url = "https://arxiv.org/abs/2007.01852",
}""",
}
_OBJECTIVE_PAPERS = {"distill": (0,), "mexma": (1,), "contrastive": (2,)}
USAGE_EXAMPLES = [
    "The weather is lovely today.",
    "Das Wetter ist heute herrlich.",
    "He drove to the stadium.",
]


class HeldOutTable:
    """Stands in for a sentence-transformers evaluator so the card's metrics/model-index show the
    final table of ``babelspace train`` (top-1 accuracy %, held-out Bible test books)."""

    description = "Translation Retrieval"
    name = "bible-test-books"
    primary_metric = "mean_after_xx>en"

    def get_config_dict(self) -> dict[str, Any]:
        return {"metric": "top-1 accuracy % (cosine)", "data": "offline Bible, whole held-out test books"}


def base_model_id(spec: str | None) -> str | None:
    """The Hub id a student starts from: named offline models map to their Hub copy; a hub id is kept;
    a local folder has none we can vouch for."""
    if not spec:
        return None
    if spec.lower() in HUB_IDS:
        return HUB_IDS[spec.lower()]
    if Path(spec).expanduser().exists() or spec.startswith((".", "/", "~")):
        return None
    return spec if spec.count("/") == 1 else None


def _corpus_names(cfg: Mapping[str, Any]) -> list[str]:
    """The run's corpora without their sampling weights (``bible:1`` -> ``bible``)."""
    names: list[str] = []
    for item in cfg.get("data") or []:
        try:
            names += mix_names([str(item)])
        except BabelspaceError:  # a file gone since training: a card with the raw name beats none
            names.append(str(item))
    return names


def _languages(cfg: Mapping[str, Any]) -> list[str]:
    """English, then ``--langs``, or else the Bible's languages and the ``--src-lang``/``--tgt-lang``
    of the other corpora."""
    langs = list(cfg.get("langs") or [])
    if not langs:
        langs = [str(cfg[k]) for k in ("src_lang", "tgt_lang") if cfg.get(k)]
    if not cfg.get("langs") and "bible" in _corpus_names(cfg):
        try:
            from babelspace.data.bible import bible_languages

            langs += list(bible_languages())
        except Exception as exc:  # noqa: BLE001 - a card without languages beats no card
            logger.warning("model card: cannot list the Bible's languages (%s)", exc)
    return list(dict.fromkeys(["en", *langs]))


def _datasets(cfg: Mapping[str, Any]) -> list[dict[str, Any]]:
    from babelspace.resources import RESOURCES

    objective = str(cfg.get("objective") or "distill")
    loss = {"fullname": f"babelspace.objectives ({objective}; see docs/training.md)"}
    out = []
    for name in _corpus_names(cfg):
        res = RESOURCES.get(name)
        if res is not None:
            label = f"{res.description} (source: {res.source}; licence: {res.licence})"
        else:
            label = f"{Path(str(name)).name} (user-supplied parallel data; licence: see its source)"
        out.append({"name": label, "columns": ["English sentence", "its translation"], "loss": loss})
    return out


def _metrics(rows: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    metrics: dict[str, float] = {}
    for row in rows:
        lang = row["lang"]
        keys = [k for k in row if k != "lang"] if lang == "mean" else ["after xx>en", "after xx>T(en)"]
        for key in keys:
            if row.get(key) is not None:
                metrics[f"{lang}_{key.replace(' ', '_')}"] = round(float(row[key]), 2)
    return metrics


def fill_model_card(
    student: SentenceTransformer,
    cfg_dict: Mapping[str, Any],
    table_rows: Sequence[Mapping[str, Any]] | None = None,
    command: str | None = None,
    model_id: str | None = None,
) -> None:
    """Fill ``student.model_card_data`` so the README.md that ``student.save`` writes names the base
    model, teacher, objective, languages, training sources and licences, the held-out table and the
    command. ``cfg_dict``: ``TrainConfig.to_dict()`` (keys used: student, teacher, objective, recipe,
    data, langs, output). ``model_id``: the Hub repository the model is published as; the card's
    title, model-index name and usage snippet then name it instead of the local output folder."""
    card = student.model_card_data
    # A model loaded from a folder keeps that folder's README text and would write it back verbatim;
    # dropping it makes ``save`` render the card from the data set here.
    if getattr(student, "_model_card_text", None):
        student._model_card_text = None
    card.local_files_only = True
    card.ir_model = False
    base = base_model_id(str(cfg_dict.get("student") or ""))
    teacher = str(cfg_dict.get("teacher") or "")
    teacher_id = base_model_id(teacher) or teacher
    if cfg_dict.get("student") == "teacher":
        base = teacher_id if "/" in teacher_id else None
    card.base_model = base
    card.language = _languages(cfg_dict)
    card.license = _LICENCES.get(base or "", card.license)
    objective = str(cfg_dict.get("objective") or "distill")
    card.model_name = f"babelspace {objective} student of {teacher_id}" + (
        f" based on {base}" if base else ""
    )
    card.train_datasets = card.validate_datasets(_datasets(cfg_dict), infer_languages=False)
    card.add_tags(["babelspace", "multilingual", "bitext-retrieval", *objective.split("+")])
    card.usage_examples = list(USAGE_EXAMPLES)
    if model_id:
        card.model_id = model_id
        card.model_name = f"{model_id}: {card.model_name}"  # the title and the model-index name
    elif cfg_dict.get("output") and not card.model_id:
        card.model_id = str(cfg_dict["output"])  # the usage snippet loads the saved folder as it is
    hyper = {"teacher": teacher_id, "objective": objective}
    if cfg_dict.get("recipe"):
        hyper["recipe"] = str(cfg_dict["recipe"])
    if command:
        hyper["command"] = f"`{command}`"
    card.non_default_hyperparameters = hyper
    card.all_hyperparameters = {k: v for k, v in cfg_dict.items() if v not in (None, [], {})}
    papers = sorted({i for part in objective.split("+") for i in _OBJECTIVE_PAPERS.get(part, (0,))})
    names = list(CITATIONS)
    card.citations = {names[i]: CITATIONS[names[i]] for i in papers}
    if table_rows:
        card.eval_results_dict = {HeldOutTable(): _metrics(table_rows)}


def update_model_card(
    folder: str | Path,
    cfg_dict: Mapping[str, Any],
    table_rows: Sequence[Mapping[str, Any]] | None = None,
    command: str | None = None,
    model_id: str | None = None,
) -> Path:
    """Rewrite README.md of a saved model folder with :func:`fill_model_card`'s fields (for the end of
    ``babelspace train``, when the held-out table exists only after the model was saved), and keep its
    inputs in :data:`CARD_INPUTS`. Writes only the card; the weights are not touched. Returns the
    README path."""
    model = SentenceTransformer(str(folder), device="cpu")
    fill_model_card(model, cfg_dict, table_rows, command, model_id)
    inputs = {"config": dict(cfg_dict), "table": list(table_rows or []), "command": command}
    (Path(folder) / CARD_INPUTS).write_text(json.dumps(inputs, indent=2, default=str), encoding="utf-8")
    writer = getattr(model, "_create_model_card", None)
    if writer is not None:
        writer(str(folder))
    else:  # a sentence-transformers without the card writer: a full save writes the card too
        model.save(str(folder))
    return Path(folder) / "README.md"


def card_for_hub(folder: str | Path, repo_id: str) -> Path:
    """Render ``folder``'s card for the Hub repository ``repo_id`` (model id, title, model-index name
    and usage snippet). A babelspace output is rendered again from its :data:`CARD_INPUTS`; another
    sentence-transformers folder gets sentence-transformers' own card with the model id, unless it
    already has a README.md, which is kept as its author wrote it."""
    folder = Path(folder)
    inputs_path = folder / CARD_INPUTS
    if inputs_path.is_file():
        inputs = json.loads(inputs_path.read_text(encoding="utf-8"))
        return update_model_card(
            folder, inputs["config"], inputs.get("table") or None, inputs.get("command"), model_id=repo_id
        )
    readme = folder / "README.md"
    if readme.is_file():
        logger.warning("%s: not written by babelspace train; published as it is", readme)
        return readme
    model = SentenceTransformer(str(folder), device="cpu")
    model.model_card_data.local_files_only = True
    model.model_card_data.model_id = repo_id
    model._create_model_card(str(folder))
    return readme
