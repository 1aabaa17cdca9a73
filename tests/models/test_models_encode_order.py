"""``models.encoder.encode`` batches texts by token count and hands the rows back in input order."""

from __future__ import annotations

import numpy as np
import pytest
from sentence_transformers import SentenceTransformer

from babelspace.models.encoder import encode, token_length_order

# few characters but many WordPiece tokens ("a a a ...") beside many characters in few tokens
# ("hello world ..."): sentence-transformers' character sort mixes them, a token sort does not
TEXTS = [
    "hello world today",
    "a a a a a a a a a",
    "people people people",
    "cat",
    "x y z x y z x y z x y z",
    "king city house land",
    "1 2 3 4 5 6 7 8",
    "good",
    "das haus ist gross",
    "le roi et la ville",
]


@pytest.fixture(scope="module")
def model(tiny_model_dir) -> SentenceTransformer:
    return SentenceTransformer(str(tiny_model_dir), device="cpu")


def _token_counts(model: SentenceTransformer, texts: list[str]) -> list[int]:
    return [len(model.tokenizer(t, add_special_tokens=False)["input_ids"]) for t in texts]


def test_rows_come_back_in_input_order(model) -> None:
    got = encode(model, TEXTS, batch_size=3, normalize=False)
    one_by_one = np.stack([model.encode([t], normalize_embeddings=False)[0] for t in TEXTS])
    np.testing.assert_allclose(got, one_by_one, atol=1e-5)


def test_each_batch_holds_texts_of_neighbouring_token_counts(model, monkeypatch) -> None:
    counts = _token_counts(model, TEXTS)
    order = token_length_order(model, TEXTS)
    assert [counts[i] for i in order] == sorted(counts, reverse=True)
    seen: list[list[str]] = []
    real = model.encode
    monkeypatch.setattr(model, "encode", lambda texts, **kw: seen.append(list(texts)) or real(texts, **kw))
    encode(model, TEXTS, batch_size=3)
    assert [len(b) for b in seen] == [3, 3, 3, 1]
    longest = [max(_token_counts(model, b)) for b in seen]
    assert longest == sorted(longest, reverse=True)
    assert set(seen[0]) == {TEXTS[i] for i in order[:3]}


def test_a_model_without_a_fast_tokenizer_encodes_in_one_call(model, monkeypatch) -> None:
    expected = encode(model, TEXTS, batch_size=4)
    monkeypatch.setattr(type(model), "tokenizer", property(lambda self: None))
    assert token_length_order(model, TEXTS) is None
    calls: list[list[str]] = []
    real = model.encode
    monkeypatch.setattr(model, "encode", lambda texts, **kw: calls.append(list(texts)) or real(texts, **kw))
    np.testing.assert_allclose(encode(model, TEXTS, batch_size=4), expected, atol=1e-5)
    assert calls == [TEXTS]


def test_token_counts_are_taken_chunk_by_chunk(model, monkeypatch) -> None:
    """Texts beyond one chunk of the length count are ordered as one list (longest first overall)."""
    import babelspace.models.encoder as encoder

    monkeypatch.setattr(encoder, "LENGTH_CHUNK", 3)
    counts = _token_counts(model, TEXTS)
    order = token_length_order(model, TEXTS)
    assert sorted(order.tolist()) == list(range(len(TEXTS)))
    assert [counts[i] for i in order] == sorted(counts, reverse=True)


def test_progress_lines_only_when_asked(model, caplog) -> None:
    with caplog.at_level("INFO", logger="babelspace.progress"):
        encode(model, TEXTS, batch_size=3, show_progress=False)
        assert not [r for r in caplog.records if r.name == "babelspace.progress"]
        encode(model, TEXTS, batch_size=3, show_progress=True)
    lines = [r.getMessage() for r in caplog.records if r.name == "babelspace.progress"]
    assert lines and lines[-1].startswith("encode: 100%") and f"{len(TEXTS)}/{len(TEXTS)}" in lines[-1]
