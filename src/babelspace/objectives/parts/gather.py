"""In-batch negatives across processes (LaBSE's cross-accelerator negatives, Feng et al. 2022, §3.2).

Under DDP each process holds a slice of the global batch. :func:`gather_rows` concatenates every
process's rows (the same order on all of them); only this process's own slice carries gradient.
A loss computed on the gathered rows is then the *whole* batch's loss on every process; its
gradient on this process reaches the parameters only through this process's rows, and DDP averages
the gradients over the ``world`` processes, so the loss must be multiplied by ``world`` (see
:func:`world_scale`) for N processes to equal one process on the global batch (the construction of
open_clip's ``gather_with_grad=False``; it needs no collective in the backward pass, so it also
works with gloo on CPUs).
"""

from __future__ import annotations

import torch


def _world() -> tuple[int, int]:
    dist = torch.distributed
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def world_scale() -> int:
    """The factor that undoes DDP's gradient averaging for a loss on gathered rows (1 alone)."""
    return _world()[1]


def gather_rows(x: torch.Tensor) -> torch.Tensor:
    """``[B, d]`` per process -> ``[world * B, d]``, rank order; own rows keep their gradient.
    Every process must hold the same number of rows."""
    rank, world = _world()
    if world == 1:
        return x
    parts = [torch.empty_like(x) for _ in range(world)]
    torch.distributed.all_gather(parts, x.detach().contiguous())
    parts[rank] = x
    return torch.cat(parts, dim=0)


def sum_over_processes(x: torch.Tensor) -> torch.Tensor:
    """``x`` summed over every process (a detached copy; ``x`` itself alone). Every process must call
    it with the same shape: it is a collective."""
    _, world = _world()
    if world == 1:
        return x
    total = x.detach().clone()
    torch.distributed.all_reduce(total)
    return total


def masked_means(
    values: torch.Tensor, masks: list[torch.Tensor], across_processes: bool
) -> list[torch.Tensor | None]:
    """The mean of ``values`` under each boolean mask (None for a mask without any entry).

    With ``across_processes`` (training under DDP) each is the mean over every process's masked
    entries: this process's sum × world / the global count, so DDP's gradient average over N
    processes equals one process on the whole batch even when the processes hold different numbers
    of entries; a mask is None only when it is empty on every process. Token-level losses (MEXMA's
    unmasking, the bottleneck's decoder) use it."""
    world = world_scale()
    if not across_processes or world == 1:
        return [values[m].mean() if bool(m.any()) else None for m in masks]
    counts = sum_over_processes(torch.stack([m.sum() for m in masks]))
    return [
        values[m].sum() * world / c if int(c) > 0 else None
        for m, c in zip(masks, counts.tolist(), strict=True)
    ]
