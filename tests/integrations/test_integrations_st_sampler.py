"""babelspace's batches as sentence-transformers' ``batch_sampler``: the sampler yields the batches
``babelspace train`` plans, epoch after epoch, and ``SentenceTransformerTrainer`` with it and
babelspace's ``DistillationLoss`` ends where babelspace's own loop ends (bench/st_trainer.py)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest
from torch.utils.data import DataLoader

from babelspace.data.pairs import ParallelPair
from babelspace.data.sampling import BalancedBatchSampler
from babelspace.integrations.sentence_transformers.sampler import (
    PairBatchSampler,
    balanced_batch_sampler,
    pairs_dataset,
)

BENCH = Path(__file__).resolve().parents[2] / "bench" / "st_trainer.py"
#: Largest difference allowed between the two loops' losses and final weights (see docs/training.md).
TOLERANCE = 1e-6


def _pairs(n: int = 30) -> list[ParallelPair]:
    out = []
    for i in range(n):
        lang = "de" if i % 3 else "fr"
        src = "the house " + "very " * (i % 7) + f"number {i}"
        out.append(ParallelPair(src, f"{lang} {i}", "en", lang, f"t:{i}"))
    return out


def test_the_sampler_yields_the_planned_batches_epoch_after_epoch() -> None:
    pairs = _pairs()
    build = balanced_batch_sampler(pairs, bucket_by_length=True)
    sampler = build(pairs_dataset(pairs), batch_size=4, drop_last=False, seed=7)
    planned = BalancedBatchSampler(pairs, 4, bucket_by_length=True, seed=7, infinite=True)
    expected = [planned.batch(step) for step in range(3 * len(sampler))]
    seen = [b for _ in range(2) for b in sampler]  # a plain loop: the sampler moves to the next epoch
    sampler.set_epoch(2)  # the trainer's call at the start of an epoch
    seen += list(DataLoader(range(len(pairs)), batch_sampler=sampler, collate_fn=list))
    assert seen == expected
    assert len(sampler) == len(pairs) // 4
    assert expected[0] != expected[len(sampler)]  # epochs differ: a sampler stuck in epoch 0 fails
    for batch in expected:  # balanced: 1 fr + 3 de (or 2 + 2 on the round-robin's extra place)
        assert {pairs[i].tgt_lang for i in batch} == {"de", "fr"}


def test_a_dataset_that_is_not_the_pairs_is_refused_or_read_in_order(caplog) -> None:
    pairs = _pairs()
    with pytest.raises(ValueError, match="30 pairs: row i of the dataset must be pairs"):
        PairBatchSampler(pairs_dataset(pairs[:10]), 4, pairs=pairs)
    with pytest.raises(ValueError, match="seed come from the trainer"):
        balanced_batch_sampler(pairs, seed=1)
    evaluation = balanced_batch_sampler(pairs)(pairs_dataset(pairs[:10]), batch_size=4, drop_last=False)
    assert list(evaluation) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert "a dataset of 10 rows is not the 30 training pairs" in caplog.text
    with pytest.raises(ValueError, match="3 teacher vectors for 30 pairs"):
        pairs_dataset(pairs, np.zeros((3, 8), dtype=np.float32))
    stored = pairs_dataset(pairs, np.arange(60, dtype=np.float32).reshape(30, 2))
    assert stored.column_names == ["source", "target", "label"] and stored[29]["label"] == [58.0, 59.0]
    looked_up = pairs_dataset(pairs, lambda texts: np.array([[len(t), 1.0] for t in texts], dtype=np.float32))
    row = looked_up[3]
    assert row["source"] == pairs[3].src and row["label"].tolist() == [len(pairs[3].src), 1.0]


def _bench():
    spec = importlib.util.spec_from_file_location("st_trainer_bench", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_st_trainer_with_babelspace_loss_and_batches_equals_babelspace_loop(
    tmp_path: Path, tiny_teacher_dir: Path, tiny_model_dir: Path
) -> None:
    """4 steps of 8 pairs over 24 pairs in two language pairs (3 batches an epoch, so the run
    crosses an epoch), lr 5e-3, seed 3, no warm-up, dropout off on both sides."""
    tsv = tmp_path / "pairs.tsv"
    rows = [(p.src, p.tgt, p.src_lang, p.tgt_lang) for p in _pairs(24)]
    tsv.write_text("".join("\t".join(r) + "\n" for r in rows), encoding="utf-8")
    got = _bench().compare(
        str(tiny_model_dir),
        tmp_path / "work",
        data=[str(tsv)],
        teacher=str(tiny_teacher_dir),
        max_steps=4,
        batch_size=8,
        max_seq_length=16,
        lr=5e-3,
        seed=3,
        device="cpu",
        threads=1,
    )
    st, ours = np.array(got["st_losses"]), np.array(got["babelspace_losses"])
    assert len(st) == len(ours) == 4
    assert ours[-1] < ours[0]  # it trained
    np.testing.assert_allclose(st, ours, rtol=TOLERANCE, atol=0)
    assert got["max_weight_difference"] <= TOLERANCE
