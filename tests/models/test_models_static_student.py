"""The static student (``babelspace export MODEL --static``): one vector per vocabulary token from
the parent's own forward pass, the parent's modules after its pooling kept, a folder that plain
sentence-transformers loads and babelspace encodes with."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from sentence_transformers import SentenceTransformer

from babelspace.cli import main
from babelspace.models.encoder import pooled_encoder
from babelspace.models.static import _hf_tokenizer, distil_static, token_vectors, token_weights


@pytest.fixture(scope="module")
def parent(tiny_model_dir: Path) -> SentenceTransformer:
    return SentenceTransformer(str(tiny_model_dir), device="cpu")


def test_a_token_vector_is_the_parents_pooled_output_of_that_token_alone(parent) -> None:
    ids, vecs = token_vectors(parent, vocab_size=12, show_progress=False)
    tokenizer = _hf_tokenizer(parent)
    word = tokenizer.convert_ids_to_tokens(int(ids[3]))
    expected = pooled_encoder(parent).encode([word], convert_to_numpy=True, normalize_embeddings=False)[0]
    assert tokenizer(word, add_special_tokens=False)["input_ids"] == [int(ids[3])]
    np.testing.assert_allclose(vecs[3], expected, atol=1e-5)
    assert not set(ids.tolist()) & set(tokenizer.all_special_ids)


def test_a_sentence_is_the_weighted_mean_of_its_token_vectors_through_the_parents_tail(parent) -> None:
    static = distil_static(parent, weighting="zipf", show_progress=False)
    assert [type(m).__name__ for m in static] == [
        "StaticEmbedding",
        "Normalize",
    ]  # parent: Transformer, Pooling, Normalize
    tokenizer = _hf_tokenizer(parent)
    text = "the house is red"
    tok = np.array(tokenizer(text, add_special_tokens=False)["input_ids"])
    all_ids, vecs = token_vectors(parent, show_progress=False)
    rows = vecs[np.searchsorted(all_ids, tok)] * token_weights(tok, "zipf")[:, None]
    expected = torch.nn.functional.normalize(torch.tensor(rows.mean(0)), dim=0).numpy()
    np.testing.assert_allclose(static.encode([text])[0], expected, atol=1e-5)


def test_a_corpus_vocabulary_distils_only_its_tokens(parent) -> None:
    texts = ["the house", "red house"]
    ids, _ = token_vectors(parent, texts=texts, show_progress=False)
    tokenizer = _hf_tokenizer(parent)
    expected = {i for t in texts for i in tokenizer(t, add_special_tokens=False)["input_ids"]}
    assert ids.tolist() == sorted(expected) and 3 <= len(ids) < len(tokenizer) // 2


def test_export_static_writes_a_folder_sentence_transformers_and_babelspace_encode_load(
    tiny_model_dir: Path, tmp_path: Path, capsys
) -> None:
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("the house is red\nthe cat sleeps\n", encoding="utf-8")
    out = tmp_path / "static"
    assert main(["export", str(tiny_model_dir), "--static", "--out", str(out), "--static-vocab-from", str(vocab),
                 "--device", "cpu"]) == 0  # fmt: skip
    assert "SentenceTransformer(" in capsys.readouterr().out
    loaded = SentenceTransformer(str(out), device="cpu")
    vec = loaded.encode(["the red house"])
    assert vec.shape == (1, 32) and np.isfinite(vec).all()
    sents = tmp_path / "s.txt"
    sents.write_text("the red house\nthe cat\n", encoding="utf-8")
    assert main(["encode", str(out), str(sents), "--out", str(tmp_path / "v.npy"), "--device", "cpu"]) == 0
    assert np.load(tmp_path / "v.npy").shape == (2, 32)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ([], "give --backend onnx|openvino or --static"),
        (["--static"], "--static needs --out"),
        (["--static", "--backend", "onnx", "--out", "x"], "one of the two"),
    ],
)
def test_export_flags_are_checked(tiny_model_dir: Path, extra: list[str], message: str, capsys) -> None:
    assert main(["export", str(tiny_model_dir), *extra]) == 2
    assert message in capsys.readouterr().err


def test_export_static_refuses_an_existing_folder(tiny_model_dir: Path, tmp_path: Path, capsys) -> None:
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "notes.txt").write_text("mine")
    assert main(["export", str(tiny_model_dir), "--static", "--out", str(tmp_path / "full")]) == 2
    assert "not an empty folder" in capsys.readouterr().err
    assert (tmp_path / "full" / "notes.txt").read_text() == "mine"


def test_the_linear_map_brings_the_static_mean_onto_the_parents_vectors(parent) -> None:
    texts = [f"the house {w} is red" for w in ("big", "small", "old", "new", "cat", "dog")] * 4
    texts += ["the cat sleeps", "a dog runs", "the red house", "is the cat old"]
    plain = distil_static(parent, texts=texts, show_progress=False)
    fitted = distil_static(parent, texts=texts, fit_texts=texts, show_progress=False)
    assert [type(m).__name__ for m in fitted] == ["StaticEmbedding", "Dense", "Normalize"]
    want = parent.encode(texts)
    err = [float(np.mean(np.sum(m.encode(texts) * want, axis=1))) for m in (plain, fitted)]
    assert err[1] > err[0]  # mean cosine to the parent's own vectors rises with the map
