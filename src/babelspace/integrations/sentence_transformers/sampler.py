"""babelspace's batches for sentence-transformers' trainer: the balanced, length-bucketed batches of
:class:`~babelspace.data.sampling.BalancedBatchSampler` as a ``batch_sampler``.

``SentenceTransformerTrainingArguments(batch_sampler=balanced_batch_sampler(pairs))`` makes
``SentenceTransformerTrainer`` draw the batches ``babelspace train`` draws: row ``i`` of the training
dataset must be ``pairs[i]`` (:func:`pairs_dataset` builds such a dataset, with the teacher's
vectors as labels for :class:`~babelspace.integrations.sentence_transformers.losses.DistillationLoss`).
The keyword arguments go to :class:`~babelspace.data.sampling.BalancedBatchSampler` (``mode``,
``bucket_by_length``, ``distinct_texts``, ``group_key``, ``group_weights``, ...); the batch size and
the seed are the trainer's (``per_device_train_batch_size``, ``seed``). Example::

    from sentence_transformers import SentenceTransformerTrainer, SentenceTransformerTrainingArguments
    from babelspace.integrations.sentence_transformers.losses import DistillationLoss
    from babelspace.integrations.sentence_transformers.sampler import balanced_batch_sampler, pairs_dataset

    args = SentenceTransformerTrainingArguments(
        "out", per_device_train_batch_size=16, batch_sampler=balanced_batch_sampler(pairs, bucket_by_length=True)
    )
    trainer = SentenceTransformerTrainer(
        model=student, args=args, train_dataset=pairs_dataset(pairs, teacher_vectors), loss=DistillationLoss(student)
    )

Epoch ``e`` yields the batches of global steps ``e·n .. e·n + n − 1`` (``n = len(sampler)``), each
the pure function of the seed and the step that ``babelspace train`` uses (``BalancedBatchSampler.batch``),
so a run resumed by the trainer (which skips the batches already seen) continues with the same batches.
Every batch is full (small groups are recycled), so ``dataloader_drop_last`` changes nothing; an
``eval_dataset`` (another length) is read in order. What this does not reproduce:
``babelspace train --grad-accum K`` cuts one batch of ``K × batch`` pairs into K passes, whereas the
trainer's ``gradient_accumulation_steps`` takes K batches of the sampler; and under several
processes accelerate hands each process whole batches in turn, where ``babelspace train`` gives
each process a slice of every global batch.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import torch
from datasets import Dataset
from sentence_transformers.base.sampler import DefaultBatchSampler
from torch.utils.data import SequentialSampler

from babelspace.data.pairs import ParallelPair
from babelspace.data.sampling import BalancedBatchSampler

__all__ = ["PairBatchSampler", "balanced_batch_sampler", "pairs_dataset"]

logger = logging.getLogger(__name__)


class PairBatchSampler(DefaultBatchSampler):
    """sentence-transformers' batch sampler over a dataset whose row ``i`` is ``pairs[i]``, yielding
    :class:`~babelspace.data.sampling.BalancedBatchSampler`'s batches (``options`` go to it)."""

    def __init__(
        self,
        dataset: Any,
        batch_size: int,
        drop_last: bool = False,
        valid_label_columns: list[str] | None = None,
        generator: Any = None,
        seed: int = 0,
        *,
        pairs: Sequence[ParallelPair],
        **options: Any,
    ) -> None:
        if len(dataset) != len(pairs):
            raise ValueError(
                f"the training dataset has {len(dataset)} rows but the sampler was given {len(pairs)} "
                "pairs: row i of the dataset must be pairs[i] (build it with pairs_dataset)"
            )
        super().__init__(dataset, batch_size, drop_last, valid_label_columns, generator, seed)
        self.batches = BalancedBatchSampler(pairs, batch_size, seed=seed, **options)

    def __len__(self) -> int:
        return len(self.batches)

    def __iter__(self) -> Iterator[list[int]]:
        first = self.epoch * len(self.batches)
        for step in range(first, first + len(self.batches)):
            yield self.batches.batch(step)
        self.epoch += 1  # a plain DataLoader that never calls set_epoch still gets the next epoch


def balanced_batch_sampler(
    pairs: Sequence[ParallelPair], **options: Any
) -> Callable[..., DefaultBatchSampler]:
    """The ``batch_sampler`` argument of ``SentenceTransformerTrainingArguments``: sentence-transformers
    calls it with the dataset, batch size and seed and gets a :class:`PairBatchSampler` over ``pairs``.

    The trainer builds its evaluation batches with the same argument: a dataset whose length is not
    ``len(pairs)`` (an ``eval_dataset``) gets its rows in order, in batches of the batch size, with a
    warning that names both lengths (so a training set that is not ``pairs`` does not go unnoticed).
    """
    taken = sorted({"batch_size", "seed"} & set(options))
    if taken:
        raise ValueError(
            f"balanced_batch_sampler: {', '.join(taken)} come from the trainer "
            "(SentenceTransformerTrainingArguments' per_device_train_batch_size and seed)"
        )
    pairs = list(pairs)

    def build(dataset: Any, **kwargs: Any) -> DefaultBatchSampler:
        if len(dataset) == len(pairs):
            return PairBatchSampler(dataset, **kwargs, pairs=pairs, **options)
        logger.warning(
            "batch_sampler: a dataset of %d rows is not the %d training pairs (an eval dataset?): "
            "its batches are its rows in order, not babelspace's",
            len(dataset),
            len(pairs),
        )
        return DefaultBatchSampler(SequentialSampler(dataset), **kwargs)

    return build


def pairs_dataset(
    pairs: Sequence[ParallelPair],
    teacher_vectors: np.ndarray | Callable[[Sequence[str]], np.ndarray] | None = None,
) -> Dataset:
    """A training dataset whose row ``i`` is ``pairs[i]``: columns ``source`` and ``target`` and, with
    ``teacher_vectors``, ``label`` (the teacher's vector of the source, for ``DistillationLoss``).

    ``teacher_vectors`` is an ``[n, d]`` array aligned with ``pairs`` (stored in the dataset), or a
    lookup from source texts to vectors such as :meth:`TeacherCache.lookup
    <babelspace.training.setup.teacher_cache.TeacherCache.lookup>`, called when rows are read
    (``Dataset.with_transform``), so a large corpus holds no copy of its teacher vectors; it must
    know the source of every row that is read (the trainer also reads the first rows for the model card).
    """
    columns: dict[str, Any] = {"source": [p.src for p in pairs], "target": [p.tgt for p in pairs]}
    if teacher_vectors is None:
        return Dataset.from_dict(columns)
    if not callable(teacher_vectors):
        vectors = np.asarray(teacher_vectors, dtype=np.float32)
        if len(vectors) != len(pairs):
            raise ValueError(f"{len(vectors)} teacher vectors for {len(pairs)} pairs")
        return Dataset.from_dict({**columns, "label": vectors.tolist()})
    lookup = teacher_vectors

    def with_labels(rows: dict[str, list]) -> dict[str, list]:
        vectors = torch.from_numpy(np.asarray(lookup(rows["source"]), dtype=np.float32))
        return {**rows, "label": list(vectors)}

    return Dataset.from_dict(columns).with_transform(with_labels)
