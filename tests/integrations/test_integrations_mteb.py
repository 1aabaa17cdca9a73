"""Saved models carry the prompt names MTEB asks for (``query``/``document``) with e5's meaning, and a
babelspace folder encodes through MTEB's sentence-transformers wrapper with both prompt types."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from babelspace.models.encoder import load_encoder
from babelspace.models.prompts import mteb_prompts
from babelspace.resources.e5_small import E5_PROMPTS

TEXTS = ["the king is in the city", "der könig ist in der stadt", "one two three"]


def test_e5_prompts_use_mteb_names_with_e5_prefixes() -> None:
    assert E5_PROMPTS["query"] == "query: " and E5_PROMPTS["document"] == "passage: "
    assert E5_PROMPTS["passage"] == "passage: "  # older callers ask for it by e5's name


def test_passage_fills_a_missing_or_empty_document_prompt() -> None:
    assert mteb_prompts({"query": "q: ", "passage": "p: ", "document": ""})["document"] == "p: "
    assert mteb_prompts({"passage": "p: "}) == {"passage": "p: ", "document": "p: "}
    assert mteb_prompts({"document": "d: ", "passage": "p: "})["document"] == "d: "  # never overridden
    assert mteb_prompts({"query": "", "document": ""}) == {"query": "", "document": ""}
    assert mteb_prompts(None) == {}


def _old_babelspace_folder(tiny_model_dir: Path, folder: Path) -> Path:
    """A folder saved before the rename: e5 prompts under ``query``/``passage``, ``document`` empty."""
    shutil.copytree(tiny_model_dir, folder)
    cfg_path = folder / "config_sentence_transformers.json"
    cfg = json.loads(cfg_path.read_text())
    cfg["prompts"] = {"query": "query: ", "passage": "passage: ", "document": ""}
    cfg["default_prompt_name"] = "query"
    cfg_path.write_text(json.dumps(cfg))
    return folder


def test_a_model_saved_by_babelspace_has_both_names(tiny_model_dir: Path, tmp_path: Path) -> None:
    old = _old_babelspace_folder(tiny_model_dir, tmp_path / "old")
    model = load_encoder(str(old), device="cpu")
    assert model.prompts["document"] == "passage: " and model.prompts["passage"] == "passage: "
    model.save(str(tmp_path / "new"))
    saved = json.loads((tmp_path / "new" / "config_sentence_transformers.json").read_text())
    assert saved["prompts"]["document"] == "passage: " and saved["prompts"]["query"] == "query: "


def test_mteb_wrapper_encodes_queries_and_documents_with_e5_prefixes(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    mteb = pytest.importorskip("mteb")
    from datasets import Dataset
    from mteb._create_dataloaders import create_dataloader
    from mteb.models.sentence_transformer_wrapper import SentenceTransformerEncoderWrapper
    from mteb.types import PromptType
    from sentence_transformers import SentenceTransformer

    old = _old_babelspace_folder(tiny_model_dir, tmp_path / "old")
    load_encoder(str(old), device="cpu").save(str(tmp_path / "saved"))  # as babelspace saves it
    st = SentenceTransformer(str(tmp_path / "saved"), device="cpu")
    wrapper = SentenceTransformerEncoderWrapper(st)  # what mteb.evaluate wraps a SentenceTransformer in
    task = mteb.get_task("Tatoeba")  # a bitext-mining task's metadata (no data is loaded)
    out = {}
    for prompt_type in (PromptType.query, PromptType.document):
        loader = create_dataloader(
            Dataset.from_dict({"id": [str(i) for i in range(len(TEXTS))], "text": TEXTS}),
            task_metadata=task.metadata,
            prompt_type=prompt_type,
        )
        out[prompt_type] = np.asarray(
            wrapper.encode(
                loader,
                task_metadata=task.metadata,
                hf_split="test",
                hf_subset="default",
                prompt_type=prompt_type,
            )
        )
    want_q = st.encode(TEXTS, prompt="query: ")
    want_d = st.encode(TEXTS, prompt="passage: ")
    np.testing.assert_allclose(out[PromptType.query], want_q, atol=1e-5)
    np.testing.assert_allclose(out[PromptType.document], want_d, atol=1e-5)
    assert not np.allclose(want_q, want_d, atol=1e-3)  # the two prompts do reach the model
