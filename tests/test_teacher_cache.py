"""Teacher cache: keyed by the teacher's content, shards written atomically and never mixed."""

from __future__ import annotations

import json
import multiprocessing as mp
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from sentence_transformers import SentenceTransformer

from babelspace.training.setup.teacher_cache import TeacherCache, teacher_key


def _retrain_in_place(model_dir: Path) -> None:
    """Same file, same header, same byte size, other weights (a teacher retrained in place):
    every float32 tensor of ``model.safetensors`` is rewritten in place as ``-1.5 x`` itself."""
    (weights,) = model_dir.rglob("model.safetensors")
    raw = bytearray(weights.read_bytes())
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8 : 8 + n])
    for name, info in header.items():
        if name == "__metadata__" or info["dtype"] != "F32":
            continue
        start, end = (8 + n + o for o in info["data_offsets"])
        values = np.frombuffer(bytes(raw[start:end]), dtype=np.float32) * -1.5
        raw[start:end] = values.astype(np.float32).tobytes()
    weights.write_bytes(bytes(raw))


def test_retrained_teacher_of_same_size_gets_a_new_key(tiny_teacher_dir, tmp_path) -> None:
    folder = tmp_path / "teacher"
    shutil.copytree(tiny_teacher_dir, folder)
    size_before = sum(p.stat().st_size for p in folder.rglob("*.safetensors"))
    key_before = teacher_key(SentenceTransformer(str(folder), device="cpu"), str(folder))
    _retrain_in_place(folder)
    assert sum(p.stat().st_size for p in folder.rglob("*.safetensors")) == size_before
    key_after = teacher_key(SentenceTransformer(str(folder), device="cpu"), str(folder))
    assert key_after != key_before


def test_retrained_teacher_does_not_reuse_stale_vectors(tiny_teacher_dir, tmp_path) -> None:
    folder = tmp_path / "teacher"
    shutil.copytree(tiny_teacher_dir, folder)
    texts = ["the king", "a house", "good day"]
    first = TeacherCache(SentenceTransformer(str(folder), device="cpu"), str(folder), tmp_path / "cache")
    old = first.lookup(texts)
    _retrain_in_place(folder)
    model = SentenceTransformer(str(folder), device="cpu")
    second = TeacherCache(model, str(folder), tmp_path / "cache")
    got = second.lookup(texts)
    assert second.encoded == 3
    np.testing.assert_allclose(got, model.encode(texts, convert_to_numpy=True), atol=1e-5)
    assert not np.allclose(got, old, atol=1e-3)


def test_cache_reloads_its_shards(tiny_teacher_dir, tmp_path) -> None:
    model = SentenceTransformer(str(tiny_teacher_dir), device="cpu")
    a = TeacherCache(model, str(tiny_teacher_dir), tmp_path)
    a.ensure(["one", "two"])
    a.ensure(["three"])
    b = TeacherCache(model, str(tiny_teacher_dir), tmp_path)
    assert len(b) == 3 and b.ensure(["one", "two", "three"]) == 0
    np.testing.assert_array_equal(b.lookup(["three", "one"]), a.lookup(["three", "one"]))
    assert not list(b.dir.glob("*.tmp*"))


def _writer(args: tuple[str, str, int]) -> int:
    model_dir, root, worker = args
    torch.set_num_threads(1)
    model = SentenceTransformer(model_dir, device="cpu")
    cache = TeacherCache(model, model_dir, Path(root))
    for round_ in range(4):
        cache.ensure([f"w{worker} r{round_} s{i}" for i in range(5)] + [f"shared s{round_}"])
    return cache.encoded


@pytest.mark.slow
def test_concurrent_processes_never_mix_shards(tiny_teacher_dir, tmp_path) -> None:
    with mp.get_context("spawn").Pool(3) as pool:
        pool.map(_writer, [(str(tiny_teacher_dir), str(tmp_path), w) for w in range(3)])
    model = SentenceTransformer(str(tiny_teacher_dir), device="cpu")
    cache = TeacherCache(model, str(tiny_teacher_dir), tmp_path)
    texts = [f"w{w} r{r} s{i}" for w in range(3) for r in range(4) for i in range(5)]
    texts += [f"shared s{r}" for r in range(4)]
    assert cache.ensure(texts) == 0
    np.testing.assert_allclose(cache.lookup(texts), model.encode(texts, convert_to_numpy=True), atol=1e-5)
