"""The held-out table's baseline vectors live in the one vector store
(:class:`babelspace.vectors.shards.ShardStore`) that mining uses, keyed by the one model identity."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from babelspace.evaluation import held_out_baselines
from babelspace.models import backends
from babelspace.models.identity import model_identity
from babelspace.vectors.shards import ShardStore

EN = ["the king and the people", "god is good", "the city of the lord"]
PER_LANG = {
    "de": ["der könig und das volk", "gott ist gut", "die stadt des herrn"],
    "fr": ["le roi", "dieu", "la ville"],
}


def test_baselines_are_a_shard_store_read_back_without_loading_the_model(
    tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = held_out_baselines.baseline_vectors(str(tiny_model_dir), EN, PER_LANG, cache_dir=tmp_path)
    folders = sorted(p.parent for p in (tmp_path / "held-out").glob("*/manifest.json"))
    assert len(folders) == 2 and not list(
        (tmp_path / "held-out").glob("*.npz")
    )  # every language; English alone
    store = ShardStore(max(folders, key=lambda f: ShardStore(f).manifest.n))
    assert store.manifest.model == model_identity(str(tiny_model_dir)).key()
    assert store.manifest.n == 9 and store.missing_shards() == []

    def no_load(*args, **kwargs):
        raise AssertionError("the cached vectors should have been read")

    monkeypatch.setattr(backends, "load_backend_encoder", no_load)
    again = held_out_baselines.baseline_vectors(str(tiny_model_dir), EN, PER_LANG, cache_dir=tmp_path)
    np.testing.assert_array_equal(again[0], first[0])
    for lang in PER_LANG:
        np.testing.assert_array_equal(again[1][lang], first[1][lang])
