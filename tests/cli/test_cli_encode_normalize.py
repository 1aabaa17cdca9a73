"""``babelspace encode`` writes the vectors ``SentenceTransformer(MODEL).encode`` returns; ``--normalize``
scales them to unit length (issue 43 item 4: the CLI wrote unit vectors, plain sentence-transformers
gave norms 0.87-0.98 on the default student, and nothing said why)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from sentence_transformers import SentenceTransformer

from babelspace.cli import main

TEXTS = ["the red house", "a cat sleeps on the sofa", "das Haus ist rot", "le chat dort"]


@pytest.fixture(scope="module")
def unnormalised_dir(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny model without its final Normalize: vectors of other lengths than 1, as the default
    student's teacher-space export gives."""
    full = SentenceTransformer(str(tiny_model_dir), device="cpu")
    assert type(full[-1]).__name__ == "Normalize"
    out = tmp_path_factory.mktemp("raw") / "model"
    SentenceTransformer(modules=[full[i] for i in range(len(full) - 1)], device="cpu").save(str(out))
    return out


def _encode(model: Path, tmp_path: Path, *flags: str) -> np.ndarray:
    src = tmp_path / "s.txt"
    src.write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    out = tmp_path / f"v{len(flags)}.npy"
    assert main(["encode", str(model), str(src), "--out", str(out), "--device", "cpu", *flags]) == 0
    return np.load(out)


def test_encode_writes_what_sentence_transformers_returns(unnormalised_dir: Path, tmp_path: Path) -> None:
    expected = SentenceTransformer(str(unnormalised_dir), device="cpu").encode(TEXTS)
    norms = np.linalg.norm(expected, axis=1)
    assert np.abs(norms - 1).max() > 0.05  # the model's own vectors are not unit-length
    np.testing.assert_allclose(_encode(unnormalised_dir, tmp_path), expected, atol=1e-5)


def test_normalize_scales_to_unit_length(unnormalised_dir: Path, tmp_path: Path) -> None:
    expected = SentenceTransformer(str(unnormalised_dir), device="cpu").encode(
        TEXTS, normalize_embeddings=True
    )
    got = _encode(unnormalised_dir, tmp_path, "--normalize")
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(got, expected, atol=1e-5)


def test_help_says_which_vectors(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["encode", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--normalize" in text and "SentenceTransformer(MODEL).encode" in text
