"""Encoding workers on distinct devices (``mine --workers``, ``encode --workers``) and Ray's GPU
reservation, decided without GPUs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from babelspace.errors import BabelspaceError, ResourceError
from babelspace.mining.devices import threads_per_worker, worker_devices
from babelspace.mining.encode import EncodeOptions


def test_workers_spread_round_robin_over_the_gpus() -> None:
    assert worker_devices("auto", 6, cuda_devices=4) == [
        "cuda:0",
        "cuda:1",
        "cuda:2",
        "cuda:3",
        "cuda:0",
        "cuda:1",
    ]
    assert worker_devices("cuda", 2, cuda_devices=2) == ["cuda:0", "cuda:1"]
    assert worker_devices("CUDA", 3, cuda_devices=1) == ["cuda:0"] * 3


def test_an_explicit_device_or_no_gpu_keeps_every_worker_on_one_device() -> None:
    assert worker_devices("cuda:1", 3, cuda_devices=4) == ["cuda:1"] * 3
    assert worker_devices("cpu", 2, cuda_devices=8) == ["cpu", "cpu"]
    assert worker_devices("auto", 2, cuda_devices=0) == ["auto", "auto"]  # each resolves to cpu/mps
    with pytest.raises(BabelspaceError, match="--device cuda: CUDA is not available"):
        worker_devices("cuda", 2, cuda_devices=0)
    with pytest.raises(BabelspaceError, match="--workers must be at least 1"):
        worker_devices("auto", 0, cuda_devices=0)


def test_cpu_threads_are_split_only_between_cpu_workers(monkeypatch) -> None:
    monkeypatch.setattr("os.cpu_count", lambda: 16)
    assert threads_per_worker(["cpu"] * 4) == 4
    assert threads_per_worker(["cuda:0", "cuda:1"]) == 1
    assert threads_per_worker(["auto"] * 32) == 1


def test_ray_gpus_per_worker_is_validated_and_parsed() -> None:
    from babelspace.cli import build_parser

    with pytest.raises(ResourceError, match="--ray-gpus-per-worker must be 0 or more"):
        EncodeOptions(ray_gpus_per_worker=-1)
    args = build_parser().parse_args(
        [
            "mine",
            "--model",
            "m",
            "--src",
            "a",
            "--tgt",
            "b",
            "--out",
            "o",
            "--ray",
            "--workers",
            "4",
            "--ray-gpus-per-worker",
            "0.5",
        ]
    )
    assert args.ray_gpus_per_worker == 0.5


@pytest.mark.slow
def test_encode_with_two_workers_equals_one_process(tiny_model_dir: Path, tmp_path: Path, capsys) -> None:
    from babelspace.cli import main

    src = tmp_path / "s.txt"
    src.write_text("\n".join(f"the king {i} and the house {i % 5}" for i in range(37)) + "\n")
    one, two = tmp_path / "one.npy", tmp_path / "two.npy"
    assert main(["encode", str(tiny_model_dir), str(src), "--out", str(one), "--device", "cpu"]) == 0
    assert (
        main(
            ["encode", str(tiny_model_dir), str(src), "--out", str(two), "--device", "cpu", "--workers", "2"]
        )
        == 0
    )
    np.testing.assert_allclose(np.load(two), np.load(one), atol=1e-5)
    assert np.load(two).shape[0] == 37


def test_local_workers_are_sentence_transformers_pool_and_resume_by_shard(
    tiny_model_dir: Path, tmp_path: Path, monkeypatch
) -> None:
    """``mine --workers 2`` encodes through ``start_multi_process_pool`` on babelspace's devices (a
    spy on it: babelspace's own pool would leave it uncalled). Interrupted after its first shard,
    the run stops its workers and keeps that shard; the rerun encodes only the other two, and the
    result equals encoding in this process."""
    from sentence_transformers import SentenceTransformer

    from babelspace.mining.corpus import fingerprint
    from babelspace.mining.encode import encode_to_shards
    from babelspace.vectors.shards import ShardStore

    pools: list[tuple[list[str], dict]] = []
    original = SentenceTransformer.start_multi_process_pool

    def spy(self, target_devices=None):  # type: ignore[no-untyped-def]
        pool = original(self, target_devices)
        pools.append((list(target_devices), pool))
        return pool

    stopped: list[dict] = []
    stop = SentenceTransformer.stop_multi_process_pool

    def stop_spy(pool):  # type: ignore[no-untyped-def]
        stopped.append(pool)
        stop(pool)

    monkeypatch.setattr(SentenceTransformer, "start_multi_process_pool", spy)
    monkeypatch.setattr(SentenceTransformer, "stop_multi_process_pool", staticmethod(stop_spy))
    texts = [f"the king {i} and the house {i % 5}" for i in range(20)]
    local = ShardStore(tmp_path / "local")
    encode_to_shards(
        texts, local, str(tiny_model_dir), fingerprint(texts), EncodeOptions(shard_size=8, batch_size=4)
    )
    assert pools == []
    write = ShardStore.write_shard

    def interrupted(self, i, *args):  # type: ignore[no-untyped-def]
        if i == 1:
            raise KeyboardInterrupt
        return write(self, i, *args)

    monkeypatch.setattr(ShardStore, "write_shard", interrupted)
    opts = EncodeOptions(shard_size=8, batch_size=4, device="cpu", executor="processes", workers=2)
    with pytest.raises(KeyboardInterrupt):
        encode_to_shards(
            texts, ShardStore(tmp_path / "pooled"), str(tiny_model_dir), fingerprint(texts), opts
        )
    assert [devices for devices, _ in pools] == [["cpu", "cpu"]]
    assert stopped == [pools[0][1]]  # no worker outlives the interrupted run
    monkeypatch.setattr(ShardStore, "write_shard", write)
    opts.workers = 1
    pooled = ShardStore(tmp_path / "pooled")
    again = encode_to_shards(texts, pooled, str(tiny_model_dir), fingerprint(texts), opts)
    assert (again["encoded"], again["reused"]) == (2, 1) and [d for d, _ in pools] == [
        ["cpu", "cpu"],
        ["cpu"],
    ]
    np.testing.assert_allclose(pooled.load_all(), local.load_all(), atol=1e-5)
