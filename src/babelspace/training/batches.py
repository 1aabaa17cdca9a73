"""The input pipeline: each step's pairs and collated (tokenized) batch, ready before the step needs it.

`step_batches` yields ``(pairs, batches)`` for the steps ``start .. total-1``: this process's share of
the planned global batch (:meth:`DataPlan.batch`, computed from the seed and the step), cut into
``--grad-accum`` forward passes (:func:`micro_batches`), and the objective's collated tensors of each
pass on the run's device.

- ``workers == 0``: everything on the main thread, step by step (the loop as it always was).
- ``workers > 0``: a `torch.utils.data.DataLoader` over the step numbers; its worker processes read
  the pairs (from the memory-mapped corpus) and tokenize them while the main process trains, a few
  steps ahead. Collated tensors come back on the CPU (pinned when the device is CUDA) and are copied
  to the device with ``non_blocking=True``. Only objectives whose ``collate`` reads no device state
  and draws no random numbers (``Objective.collate_in_workers``: distillation, contrastive) are
  collated in workers; the others stay on the main thread, so their batches (MEXMA's masks drawn from
  the global RNG) are exactly those of a run without workers. Either way the batch of a step is the
  same, so a resumed run continues with exactly the batches of the uninterrupted one.

With a token cache (``tokens``, `babelspace.training.setup.token_plan`) each pass's token ids are
looked up by index and handed to the objective around its ``collate``
(``Objective.cached_ids``): its ``tokenize`` pads them into the tensors the tokenizer would have
made (the same batches), and tokenizes only texts that are not the pairs' own (none of the
built-in objectives; the bottleneck's decoder targets, tokenized without the prompt, still are).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from typing import Any

import torch
from torch.utils.data import DataLoader, Dataset

from babelspace.data.pairs import ParallelPair
from babelspace.objectives.base import Objective
from babelspace.training.setup.phases import DataPlan
from babelspace.training.setup.token_plan import TrainTokens

logger = logging.getLogger(__name__)

#: Batches each worker prepares ahead of the step that consumes them.
PREFETCH_PER_WORKER = 4
# torch's two reports of a worker process that died (killed by a signal, or exited) while loading
_WORKER_DIED = re.compile(r"DataLoader worker \(pid(?:\(s\))? ([0-9, ]+)\) (.+?)\.?\s*$", re.S)


class StepBatches(Dataset):
    """Item ``step``: ``(pairs, batches)``, this process's share of the step's global batch in
    ``grad_accum`` forward passes, and the collated tensors of each pass."""

    def __init__(
        self,
        plan: DataPlan,
        objective: Objective,
        rank: int,
        world: int,
        grad_accum: int = 1,
        tokens: TrainTokens | None = None,
    ):
        self.plan, self.objective, self.rank, self.world = plan, objective, rank, world
        self.grad_accum, self.tokens = grad_accum, tokens
        self.readers = cache_readers(objective)

    def __len__(self) -> int:
        return self.plan.total_steps

    def indices(self, step: int) -> list[list[int]]:
        share = list(self.plan.batch(step)[self.rank :: self.world])
        return micro_batches(share, self.grad_accum)

    def pairs(self, step: int) -> list[list[ParallelPair]]:
        return [self.plan.pairs(chunk) for chunk in self.indices(step)]

    def __getitem__(self, step: int) -> tuple[list[list[ParallelPair]], list[dict[str, Any]]]:
        chunks = [(idx, self.plan.pairs(idx)) for idx in self.indices(step)]
        return [pairs for _, pairs in chunks], [self.collate(idx, pairs) for idx, pairs in chunks]

    def collate(self, idx: list[int], pairs: list[ParallelPair]) -> dict[str, Any]:
        if self.tokens is None:
            return self.objective.collate(pairs)
        cached = self.tokens.lookup(idx, pairs)
        for reader in self.readers:
            reader.cached_ids = cached
        try:
            return self.objective.collate(pairs)
        finally:
            for reader in self.readers:
                reader.cached_ids = None


def cache_readers(objective: Objective) -> list[Objective]:
    """The objectives in ``objective`` (itself included) that tokenize as it does (its student's
    tokenizer, its prompt): those whose texts the token cache serves."""
    tokenizer = objective.student.tokenizer
    return [
        m
        for m in objective.modules()
        if isinstance(m, Objective) and m.prompt == objective.prompt and m.student.tokenizer is tokenizer
    ]


def micro_batches(share: list[int], k: int) -> list[list[int]]:
    """``share`` cut into ``k`` consecutive forward passes as equal as possible (the first ones one
    longer when it does not divide); ``k`` passes always, so accelerate's step counter stays aligned."""
    size, extra = divmod(len(share), k)
    out, start = [], 0
    for i in range(k):
        stop = start + size + (i < extra)
        out.append(share[start:stop])
        start = stop
    return out


def _worker_init(_worker_id: int) -> None:
    """A loader worker collates on the CPU, with one intra-op thread (the workers are the parallelism)."""
    info = torch.utils.data.get_worker_info()
    assert info is not None
    torch.set_num_threads(1)
    for module in info.dataset.objective.modules():
        if isinstance(module, Objective):
            module.collate_device = torch.device("cpu")


def to_device(batch: Any, device: torch.device) -> Any:
    """``batch`` (nested dicts/lists of tensors) on ``device``, copied without waiting for the host."""
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=True)
    if isinstance(batch, dict):
        return {k: to_device(v, device) for k, v in batch.items()}
    if isinstance(batch, list | tuple):
        return type(batch)(to_device(v, device) for v in batch)
    return batch


def loader_workers(requested: int | None, device: torch.device, objective: Objective) -> int:
    """Worker processes for the run: as requested (unset: 2 on a GPU, 0 elsewhere), 0 when the
    objective cannot collate in a worker."""
    workers = requested if requested is not None else (2 if device.type == "cuda" else 0)
    if workers and not objective.collate_in_workers:
        logger.info(
            "%s collates on the main thread (its batches draw random numbers or read device state)",
            objective.name,
        )
        return 0
    return workers


def step_batches(
    plan: DataPlan,
    objective: Objective,
    device: torch.device,
    *,
    rank: int = 0,
    world: int = 1,
    start: int = 0,
    workers: int = 0,
    grad_accum: int = 1,
    tokens: TrainTokens | None = None,
) -> Iterator[tuple[list[list[ParallelPair]], list[dict[str, Any]]]]:
    """``(pairs, batches)`` for the steps ``start .. plan.total_steps - 1``, in order (one entry per
    forward pass of the step; token ids from ``tokens`` when given)."""
    items = StepBatches(plan, objective, rank, world, grad_accum, tokens)
    if workers == 0:
        for step in range(start, plan.total_steps):
            yield items[step]
        return
    loader = DataLoader(
        items,
        batch_size=None,  # an item is already a whole batch
        sampler=range(start, plan.total_steps),
        num_workers=workers,
        pin_memory=device.type == "cuda",
        prefetch_factor=PREFETCH_PER_WORKER,
        worker_init_fn=_worker_init,
        generator=torch.Generator(),  # the loader's seed draw leaves the global RNG alone
    )
    for pairs, batch in loader:
        yield pairs, to_device(batch, device)


def dead_worker(exc: BaseException) -> str | None:
    """``"input worker process 1234 is killed by signal: Killed"`` when ``exc`` is torch's report
    of a ``DataLoader`` worker that died, else None (an error raised inside a worker is re-raised
    as itself, not as this report)."""
    match = _WORKER_DIED.search(str(exc)) if isinstance(exc, RuntimeError) else None
    if match is None:
        return None
    pids = match.group(1).strip()
    return f"input worker process{'es' if ',' in pids else ''} {pids} {match.group(2).strip()}"
