"""``--gather-negatives``: two gloo processes, each with half of a batch, give the same gradients as
one process on the whole batch (contrastive in-batch negatives, MEXMA's KoLeo)."""

from __future__ import annotations

import os

import pytest
import torch
import torch.multiprocessing as mp
from sentence_transformers import SentenceTransformer

from babelspace.data.pairs import ParallelPair

SRC = ["cat", "the big dog sits on the mat", "rain", "hello world today", "god is good", "one two three"]
TGT = ["volk", "der könig und das haus", "tag", "la maison est grande", "dieu est bon", "ein zu von"]
PAIRS = [
    ParallelPair(s, t, "en", "de", f"t:{i}")
    for i, (s, t) in enumerate(
        zip(SRC + ["the small city", "a bad day"], TGT + ["die stadt", "le jour"], strict=True)
    )
]


def _objective(name: str, model_dir: str, gather: bool) -> torch.nn.Module:
    student = SentenceTransformer(model_dir, device="cpu")
    if name == "contrastive":
        from babelspace.objectives.contrastive import ContrastiveObjective

        obj = ContrastiveObjective(student, gather_negatives=gather)
    else:
        from babelspace.objectives.mexma import MexmaObjective, make_mexma_student

        student = make_mexma_student(student)
        # KoLeo alone: the other terms are per pair and need no gathering
        obj = MexmaObjective(
            student,
            ce_weight=0.0,
            sentence_mse_weight=0.0,
            koleo_weight=1.0,
            head_layers=1,
            head_heads=2,
            gather_negatives=gather,
        )
    obj.eval()  # no dropout: both sides must compute the same function
    return obj


def _grads(obj: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {n: p.grad.detach().clone() for n, p in obj.student.named_parameters() if p.grad is not None}


def _worker(rank: int, world: int, name: str, model_dir: str, init: str, out: str) -> None:
    torch.distributed.init_process_group("gloo", init_method=init, rank=rank, world_size=world)
    try:
        torch.manual_seed(0)
        obj = _objective(name, model_dir, gather=True)
        ddp = torch.nn.parallel.DistributedDataParallel(obj, find_unused_parameters=True)
        pairs = PAIRS[rank::world]  # the trainer's split of a planned global batch
        ddp(obj.collate(pairs))["loss"].backward()
        if rank == 0:
            torch.save(_grads(obj), out)
        torch.distributed.barrier()
    finally:
        torch.distributed.destroy_process_group()


def _compare(name: str, model_dir: str, tmp_path) -> None:
    torch.manual_seed(0)
    single = _objective(name, model_dir, gather=False)
    single(single.collate(PAIRS))["loss"].backward()
    expected = _grads(single)

    out = tmp_path / "grads.pt"
    init = f"file://{tmp_path / 'rendezvous'}"
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    mp.spawn(_worker, args=(2, name, model_dir, init, str(out)), nprocs=2, join=True)
    got = torch.load(out, weights_only=True)
    assert got.keys() == expected.keys() and expected
    for k in expected:
        torch.testing.assert_close(got[k], expected[k], rtol=1e-5, atol=1e-5)


def test_contrastive_two_processes_with_gathered_negatives_equal_one_process(
    tiny_model_dir, tmp_path
) -> None:
    _compare("contrastive", str(tiny_model_dir), tmp_path)


@pytest.mark.slow
def test_mexma_koleo_two_processes_gathered_equal_one_process(e5_small_path, tmp_path) -> None:
    """On the real e5-small: the tiny random model maps every sentence to nearly the same CLS vector
    (nearest-neighbour gaps of 1e-5), where KoLeo's choice of neighbour flips with float rounding."""
    _compare("mexma", str(e5_small_path), tmp_path)


def test_without_gathering_two_processes_differ(tiny_model_dir, tmp_path) -> None:
    """The check above can fail: per-process negatives (the default) give other gradients."""
    torch.manual_seed(0)
    single = _objective("contrastive", str(tiny_model_dir), gather=False)
    single(single.collate(PAIRS))["loss"].backward()
    expected = _grads(single)
    half = _objective("contrastive", str(tiny_model_dir), gather=False)
    loss = 0.5 * sum(half(half.collate(PAIRS[r::2]))["loss"] for r in range(2))  # DDP's average
    loss.backward()
    got = _grads(half)
    assert any(not torch.allclose(got[k], expected[k], rtol=1e-5, atol=1e-5) for k in expected)
