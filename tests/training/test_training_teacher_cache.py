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


# ----------------------------------------------------------------------------- at scale: shards, shares, checks
TEXTS = [f"the king {i} of the land {i % 7}" for i in range(23)]


def _tiny_teacher(path: Path) -> SentenceTransformer:
    return SentenceTransformer(str(path), device="cpu")


def test_a_kill_mid_encode_keeps_the_finished_shards(tiny_teacher_dir, tmp_path, monkeypatch) -> None:
    """Shards are written as they are encoded: a failure in the third chunk of 5 texts leaves two
    shards, and the rerun encodes only the 13 texts they lack."""
    import babelspace.training.setup.teacher_cache as tc

    model = _tiny_teacher(tiny_teacher_dir)
    calls = {"n": 0}
    real = tc.encode

    def fail_on_third(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt  # a kill while the third shard is encoded
        return real(*args, **kwargs)

    monkeypatch.setattr(tc, "encode", fail_on_third)
    with pytest.raises(KeyboardInterrupt):
        TeacherCache(model, str(tiny_teacher_dir), tmp_path, shard_texts=5).ensure(TEXTS)
    monkeypatch.setattr(tc, "encode", real)
    again = TeacherCache(model, str(tiny_teacher_dir), tmp_path, shard_texts=5)
    assert len(again) == 10
    assert again.ensure(TEXTS) == 13
    np.testing.assert_allclose(again.lookup(TEXTS), model.encode(TEXTS, convert_to_numpy=True), atol=1e-5)
    assert not list(again.dir.glob(".tmp-*"))


def test_shards_are_memory_mapped(tiny_teacher_dir, tmp_path) -> None:
    model = _tiny_teacher(tiny_teacher_dir)
    TeacherCache(model, str(tiny_teacher_dir), tmp_path, shard_texts=8).ensure(TEXTS[:16])
    cache = TeacherCache(model, str(tiny_teacher_dir), tmp_path, shard_texts=8)
    assert cache.ensure(TEXTS) == len(TEXTS) - 16
    np.testing.assert_allclose(cache.lookup(TEXTS), model.encode(TEXTS, convert_to_numpy=True), atol=1e-5)
    mapped = [s for s in cache._shards if s.path.is_dir()]
    assert len(mapped) == 3 and all(isinstance(s.vecs, np.memmap) for s in mapped)
    cache._max_mapped = 1  # each map holds a file descriptor: beyond the cap the oldest is released
    np.testing.assert_allclose(cache.lookup(TEXTS), model.encode(TEXTS, convert_to_numpy=True), atol=1e-5)
    assert sum(s.vecs is not None for s in mapped) == 1


def _spoil(shard: Path, how: str) -> None:
    vecs = np.load(shard / "vecs.npy")
    if how == "nan":
        vecs[1, 3] = np.nan
    elif how == "norm":
        vecs[2] *= 1e30
    elif how == "dim":
        vecs = vecs[:, :-1].copy()
    np.save(shard / "vecs.npy", vecs)


@pytest.mark.parametrize("how", ["nan", "norm", "dim"])
def test_a_spoilt_shard_is_named_and_reencoded(tiny_teacher_dir, tmp_path, caplog, how: str) -> None:
    model = _tiny_teacher(tiny_teacher_dir)
    first = TeacherCache(model, str(tiny_teacher_dir), tmp_path, shard_texts=8)
    first.ensure(TEXTS)
    spoilt = sorted(first.dir.glob("shard-*"))[0]
    _spoil(spoilt, how)
    cache = TeacherCache(model, str(tiny_teacher_dir), tmp_path, shard_texts=8)
    with caplog.at_level("WARNING"):
        got = cache.lookup(TEXTS)
    assert cache.encoded == 8  # the spoilt shard's texts, no more
    np.testing.assert_allclose(got, model.encode(TEXTS, convert_to_numpy=True), atol=1e-5)
    reason = {"nan": "non-finite values in row 1", "norm": "row 2 has norm", "dim": "expected (rows, 48)"}[
        how
    ]
    assert any(spoilt.name in r.message and reason in r.message for r in caplog.records)


def test_a_teacher_that_gives_nan_stops_in_one_line(tiny_teacher_dir, tmp_path, monkeypatch) -> None:
    import babelspace.training.setup.teacher_cache as tc
    from babelspace.errors import TrainingError

    model = _tiny_teacher(tiny_teacher_dir)
    monkeypatch.setattr(tc, "encode", lambda _m, texts, **_k: np.full((len(texts), 48), np.nan, np.float32))
    cache = TeacherCache(model, str(tiny_teacher_dir), tmp_path)
    with pytest.raises(TrainingError, match=r"produced non-finite vectors for 23 of 23 texts") as err:
        cache.ensure(TEXTS)
    assert "\n" not in str(err.value)
    assert not list(cache.dir.glob("shard-*"))  # nothing stored for the next run to trust


def _share_worker(rank: int, init: str, model_dir: str, root: str, results: dict) -> None:
    from babelspace.training.setup.teacher_cache import encode_shared

    torch.set_num_threads(1)
    torch.distributed.init_process_group("gloo", init_method=init, rank=rank, world_size=2)
    cache = TeacherCache(SentenceTransformer(model_dir, device="cpu"), model_dir, Path(root), shard_texts=5)
    encode_shared(cache, lambda: iter(TEXTS), rank, 2, torch.distributed.barrier)
    results[rank] = (cache.encoded, cache.lookup(TEXTS))
    torch.distributed.destroy_process_group()


@pytest.mark.slow
def test_encoding_split_over_two_processes_equals_one_process(tiny_teacher_dir, tmp_path) -> None:
    """Two gloo processes each encode their share of the 23 texts (by key), in shards of 5, and both
    then read all 23 vectors, equal to one process encoding everything."""
    import torch.multiprocessing as tmp_mp

    results = tmp_mp.Manager().dict()
    init = f"file://{tmp_path / 'rendezvous'}"
    args = (init, str(tiny_teacher_dir), str(tmp_path / "two"), results)
    tmp_mp.start_processes(_share_worker, args=args, nprocs=2, start_method="spawn", join=True)
    n0, n1 = results[0][0], results[1][0]
    assert n0 + n1 == 23 and n0 and n1
    model = _tiny_teacher(tiny_teacher_dir)
    one = TeacherCache(model, str(tiny_teacher_dir), tmp_path / "one").lookup(TEXTS)
    for rank in (0, 1):
        np.testing.assert_allclose(results[rank][1], one, atol=1e-5)
    assert len(list((tmp_path / "two").rglob("shard-*"))) == -(-n0 // 5) + -(-n1 // 5)


def test_key_set_matches_a_python_set() -> None:
    from babelspace.training.setup.teacher_cache import _keys_of, _KeySet

    rng = np.random.default_rng(0)
    seen, keys = set(), _KeySet()
    for _ in range(12):
        batch = [f"t{i}" for i in rng.integers(0, 300, 40)]
        k = _keys_of(batch)
        assert keys.contains(k).tolist() == [t in seen for t in batch]
        keys.add(k)
        seen.update(batch)
    assert sum(map(len, keys.levels)) == len(seen)  # each key once, across levels


def test_shares_are_disjoint_cover_everything_and_repeats_are_encoded_once(
    tiny_teacher_dir, tmp_path, monkeypatch
) -> None:
    """encode_share streams its texts in chunks: ranks 0 and 1 of 2 (run one after the other)
    split the distinct texts between them, a text repeated across chunks is encoded once, and a
    second pass finds nothing left to encode."""
    import babelspace.training.setup.teacher_cache as tc

    monkeypatch.setattr(tc, "STREAM_CHUNK", 4)
    stream = TEXTS + TEXTS[::-1] + TEXTS[:7]
    model = _tiny_teacher(tiny_teacher_dir)
    cache = TeacherCache(model, str(tiny_teacher_dir), tmp_path, shard_texts=5)
    counts = [cache.encode_share(iter(stream), rank, 2) for rank in (0, 1)]
    assert sum(counts) == len(set(TEXTS)) and all(counts)
    assert cache.encode_share(iter(stream)) == 0
    fresh = TeacherCache(model, str(tiny_teacher_dir), tmp_path / "one")
    np.testing.assert_allclose(cache.lookup(TEXTS), fresh.lookup(TEXTS), atol=1e-5)


def test_one_process_with_a_cache_it_cannot_write_still_has_every_vector(
    tiny_teacher_dir, tmp_path, monkeypatch
) -> None:
    """encode_shared streams its texts once in one process: vectors it could not store stay in
    memory for the run, equal to what a writable cache gives."""
    import babelspace.training.setup.teacher_cache as tc
    import babelspace.training.setup.teacher_shards as shards

    def read_only(*_a, **_k):
        raise OSError(30, "Read-only file system")

    model = _tiny_teacher(tiny_teacher_dir)
    want = TeacherCache(model, str(tiny_teacher_dir), tmp_path / "ok").lookup(TEXTS)
    monkeypatch.setattr(shards.os, "replace", read_only)
    cache = TeacherCache(model, str(tiny_teacher_dir), tmp_path / "ro", shard_texts=5)
    tc.encode_shared(cache, lambda: iter(TEXTS + TEXTS), 0, 1, lambda: None)
    assert cache.encoded == len(TEXTS) and not list((tmp_path / "ro").rglob("shard-*"))
    np.testing.assert_allclose(cache.lookup(TEXTS), want, atol=1e-5)
    assert cache.encoded == len(TEXTS)  # nothing encoded twice
