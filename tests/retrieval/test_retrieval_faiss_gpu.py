"""GPU faiss is used when the installed faiss has it (babelspace.retrieval.faiss_gpu). faiss-cpu has no
GPU, so a fake GPU build stands in: ``StandardGpuResources``, ``get_num_gpus`` and ``index_cpu_to_gpu``
(which records the index and hands back the CPU index, so the search itself still runs)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from babelspace.mining.memory import plan_search
from babelspace.mining.search import SearchOptions, sharded_knn
from babelspace.retrieval.faiss_gpu import faiss_gpu_count, on_gpu
from babelspace.retrieval.knn import knn_search, l2_normalize
from babelspace.vectors.shards import ArrayMatrix

faiss = pytest.importorskip("faiss")


@pytest.fixture()
def fake_gpu(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, str]]:
    """Makes faiss look like a GPU build with 2 GPUs; returns the (device, index type) of each copy."""
    import babelspace.retrieval.faiss_gpu as mod

    copies: list[tuple[int, str]] = []

    class Resources:
        pass

    def to_gpu(res: Any, device: int, index: Any) -> Any:
        assert isinstance(res, Resources)
        copies.append((device, type(index).__name__))
        return index

    monkeypatch.setattr(faiss, "StandardGpuResources", Resources, raising=False)
    monkeypatch.setattr(faiss, "get_num_gpus", lambda: 2, raising=False)
    monkeypatch.setattr(faiss, "index_cpu_to_gpu", to_gpu, raising=False)
    monkeypatch.setattr(mod, "_resources", {})
    monkeypatch.delenv("BABELSPACE_FAISS_GPU", raising=False)
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    return copies


def _vectors(n: int, d: int = 16, seed: int = 0) -> np.ndarray:
    return l2_normalize(np.random.default_rng(seed).standard_normal((n, d)).astype(np.float32))


def test_faiss_cpu_has_no_gpu_and_indexes_stay() -> None:
    if hasattr(faiss, "StandardGpuResources"):
        pytest.skip("a GPU build of faiss is installed")
    assert faiss_gpu_count() == 0
    index = faiss.IndexFlatIP(4)
    assert on_gpu(index) is index


def test_exact_search_goes_to_the_gpu_and_finds_the_same(fake_gpu, monkeypatch: pytest.MonkeyPatch) -> None:
    q, db = _vectors(50), _vectors(300, seed=1)
    s, i = knn_search(q, db, 5, chunk_size=128)
    ref_s, ref_i = knn_search(q, db, 5, backend="numpy")
    assert np.array_equal(i, ref_i) and np.allclose(s, ref_s, atol=1e-5)
    assert fake_gpu == [(0, "IndexFlatIP")] * 3  # one index per database chunk of 128 rows
    monkeypatch.setenv("LOCAL_RANK", "3")  # under torchrun: rank 3 of a 2-GPU machine -> GPU 1
    knn_search(q, db, 5)
    assert fake_gpu[-1] == (1, "IndexFlatIP")


def test_ivf_mining_index_goes_to_the_gpu(fake_gpu) -> None:
    src, tgt = _vectors(200), _vectors(600, seed=2)
    plan = plan_search(len(src), len(tgt), 16, 4, 10**9)
    sims, ids = sharded_knn(ArrayMatrix(src), ArrayMatrix(tgt), 4, plan, SearchOptions(index="ivf", nlist=8))
    assert ("IndexIVFFlat" in {name for _, name in fake_gpu}) and ids.shape == (200, 4)


def test_env_switch_keeps_indexes_on_the_cpu(fake_gpu, monkeypatch: pytest.MonkeyPatch) -> None:
    assert faiss_gpu_count() == 2
    monkeypatch.setenv("BABELSPACE_FAISS_GPU", "0")
    assert faiss_gpu_count() == 0
    knn_search(_vectors(5), _vectors(20, seed=3), 2)
    assert fake_gpu == []


def test_an_index_without_a_gpu_version_stays_on_the_cpu(fake_gpu, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(res: Any, device: int, index: Any) -> Any:
        raise RuntimeError("not implemented for this type of index\nmore detail")

    monkeypatch.setattr(faiss, "index_cpu_to_gpu", refuse)
    index = faiss.IndexFlatIP(4)
    assert on_gpu(index) is index
