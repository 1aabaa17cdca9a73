"""Batch samplers over parallel pairs: balanced per language pair, length-bucketed, seeded, resumable.

The batches of epoch ``e`` are a pure function of ``(seed, e)`` and the pairs, so a run resumed
from `BalancedBatchSampler.state_dict` yields exactly the batches the uninterrupted run would have.

How the pairs are drawn: each language pair (group) has an endless stream of indices, the
concatenation of seeded permutations of the group. Every batch takes the next few indices of every
group's stream (``mode="balanced"``: the same number from each group, as in the multilingual
distillation paper's equal sampling; with ``batch_size % n_groups`` left over, the extra places go
round-robin through the groups). Small groups are thus reshuffled and recycled while large ones are
still being walked through; a stream continues across epochs, so a large group is covered before
anything in it repeats. ``mode="proportional"`` treats all pairs as one group: plain shuffled batches
in which each language pair appears as often as it does in the data (sentence-transformers' default).

With ``bucket_by_length=True``, every window of ``bucket_window`` (default 50) batches is drawn at
once; within each group the window's indices are sorted by source length (characters) and cut into
the batches in order, so each batch holds sentences of similar length (less padding) and still the
same number per group; the order of batches within the window is then shuffled.

A pair never appears twice in one batch while its group has at least as many pairs as its share of
a batch: copies from recycling are swapped with a nearby batch (`_separate_repeats`).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterator, Sequence
from typing import Any, Literal

import numpy as np
from torch.utils.data import Sampler

from babelspace.data.pairs import ParallelPair

__all__ = ["BalancedBatchSampler"]

logger = logging.getLogger(__name__)

# Tags that keep the random streams of different purposes apart.
_PERMUTATION, _WINDOW_ORDER = 0, 1


def _separate_repeats(parts: list[np.ndarray]) -> None:
    """Swap repeated indices out of a batch's part with the nearest batch that can take them.

    A recycled group repeats its indices: at the boundary of two permutations, and often when a
    window of a small group is sorted by length (the copies of one pair are then adjacent). A pair
    twice in one batch would be its own in-batch negative, so each copy is exchanged (in place)
    with an index of a nearby batch (similar length when bucketed) that neither batch holds yet.
    Impossible only when a group has fewer pairs than its share of a batch; then copies stay.
    """
    n = len(parts)
    for b, part in enumerate(parts):
        if len(np.unique(part)) == len(part):
            continue
        held = Counter(part.tolist())
        for pos in range(len(part)):
            x = int(part[pos])
            if held[x] < 2:
                continue
            for nb in _neighbours(b, n):
                other = parts[nb]
                if x in other:
                    continue
                candidates = [q for q in range(len(other)) if int(other[q]) not in held]
                if candidates:
                    q = candidates[0]
                    y = int(other[q])
                    part[pos], other[q] = y, x
                    held[x] -= 1
                    held[y] += 1
                    break


def _neighbours(b: int, n: int) -> Iterator[int]:
    """b+1, b-1, b+2, b-2, ... within 0..n-1."""
    for d in range(1, n):
        if b + d < n:
            yield b + d
        if b - d >= 0:
            yield b - d


class BalancedBatchSampler(Sampler[list[int]]):
    """Batches of indices into ``pairs``; use as ``DataLoader(dataset, batch_sampler=sampler)``.

    Args:
        pairs: the training pairs (only languages and source lengths are looked at).
        batch_size: indices per batch.
        mode: ``"balanced"`` (same count per language pair in every batch) or ``"proportional"``.
        bucket_by_length: group sentences of similar source length into the same batch.
        seed: everything random derives from it.
        num_batches: batches per epoch; default ``max(1, len(pairs) // batch_size)``.
        infinite: keep yielding, epoch after epoch, instead of stopping at the end of an epoch.
        bucket_window: batches drawn together when bucketing.

    ``state_dict()`` records the epoch and the number of batches already yielded in it. With a
    ``DataLoader`` using worker processes, the loader fetches batches ahead of the training loop; then
    pass the number of batches the loop actually consumed (``state_dict(batches_done=global_step)``).
    """

    def __init__(
        self,
        pairs: Sequence[ParallelPair],
        batch_size: int,
        *,
        mode: Literal["balanced", "proportional"] = "balanced",
        bucket_by_length: bool = False,
        seed: int = 0,
        num_batches: int | None = None,
        infinite: bool = False,
        bucket_window: int = 50,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if not pairs:
            raise ValueError("cannot sample batches from an empty list of pairs")
        if mode not in ("balanced", "proportional"):
            raise ValueError(f"mode must be 'balanced' or 'proportional', got {mode!r}")
        if bucket_window < 1:
            raise ValueError(f"bucket_window must be >= 1, got {bucket_window}")
        self.batch_size = batch_size
        self.mode = mode
        self.bucket_by_length = bucket_by_length
        self.seed = seed
        self.infinite = infinite
        self.bucket_window = bucket_window
        self.num_pairs = len(pairs)
        self.num_batches = num_batches if num_batches is not None else max(1, len(pairs) // batch_size)
        if self.num_batches < 1:
            raise ValueError(f"num_batches must be >= 1, got {self.num_batches}")
        self._lengths = np.fromiter((len(p.src) for p in pairs), dtype=np.int64, count=len(pairs))
        if mode == "balanced":
            by_pair: dict[tuple[str, str], list[int]] = {}
            for i, p in enumerate(pairs):
                by_pair.setdefault((p.src_lang, p.tgt_lang), []).append(i)
            self.group_names = sorted(by_pair)
            self._groups = [np.asarray(by_pair[k], dtype=np.int64) for k in self.group_names]
        else:
            self.group_names = [("*", "*")]
            self._groups = [np.arange(len(pairs), dtype=np.int64)]
        self.epoch = 0
        self.batch_index = 0
        logger.debug(
            "sampler: %d pairs, %d groups, %d batches of %d per epoch (%s%s)",
            self.num_pairs,
            len(self._groups),
            self.num_batches,
            batch_size,
            mode,
            ", bucketed" if bucket_by_length else "",
        )

    # ----------------------------------------------------------------- public API
    def __len__(self) -> int:
        """Batches per epoch."""
        return self.num_batches

    def set_epoch(self, epoch: int) -> None:
        """Go to the start of ``epoch``; a no-op if already in it (keeps a resumed position)."""
        if epoch != self.epoch:
            self.epoch = epoch
            self.batch_index = 0

    def state_dict(self, batches_done: int | None = None) -> dict[str, Any]:
        """Where the sampler stands: ``epoch``, ``batch_index`` (next batch in the epoch) and ``seed``.

        ``batches_done``: the number of batches the consumer has used since the start of epoch 0 (e.g.
        the trainer's global step), when it lags behind the sampler (a prefetching ``DataLoader``);
        the position is then taken from it instead of from what the sampler has yielded.
        """
        if batches_done is None:
            epoch, batch_index = self.epoch, self.batch_index
        else:
            epoch, batch_index = divmod(batches_done, self.num_batches)
        return {
            "epoch": epoch,
            "batch_index": batch_index,
            "seed": self.seed,
            "batch_size": self.batch_size,
            "num_pairs": self.num_pairs,
            "mode": self.mode,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from a `state_dict`; the sampler must be built over the same pairs and settings."""
        for key, have in (
            ("batch_size", self.batch_size),
            ("num_pairs", self.num_pairs),
            ("mode", self.mode),
        ):
            if key in state and state[key] != have:
                raise ValueError(f"sampler state has {key}={state[key]!r} but this sampler has {have!r}")
        self.seed = int(state["seed"])
        self.epoch = int(state["epoch"])
        self.batch_index = int(state["batch_index"])
        if self.batch_index >= self.num_batches:
            self.epoch += 1
            self.batch_index = 0

    def __iter__(self) -> Iterator[list[int]]:
        while True:
            batches = self.epoch_batches(self.epoch)
            while self.batch_index < self.num_batches:
                batch = batches[self.batch_index]
                self.batch_index += 1
                yield batch
            self.epoch += 1
            self.batch_index = 0
            if not self.infinite:
                return

    def epoch_batches(self, epoch: int) -> list[list[int]]:
        """All batches of ``epoch`` (deterministic; does not move the sampler)."""
        first = epoch * self.num_batches
        shares = self._shares(first, self.num_batches)  # [n_groups, num_batches]
        batches: list[list[np.ndarray]] = [[] for _ in range(self.num_batches)]
        for g in range(len(self._groups)):
            drawn = self._draw(g, self._drawn_before(g, first), int(shares[g].sum()))
            cuts = np.cumsum(shares[g])
            if self.bucket_by_length:
                w = self.bucket_window
                for start in range(0, self.num_batches, w):
                    lo = cuts[start - 1] if start else 0
                    hi = cuts[min(start + w, self.num_batches) - 1]
                    window = drawn[lo:hi]
                    drawn[lo:hi] = window[np.argsort(self._lengths[window], kind="stable")]
            parts = np.split(drawn, cuts[:-1])
            _separate_repeats(parts)
            for b, part in enumerate(parts):
                batches[b].append(part)
        merged = [np.concatenate(parts).tolist() for parts in batches]
        if self.bucket_by_length:
            for start in range(0, self.num_batches, self.bucket_window):
                stop = min(start + self.bucket_window, self.num_batches)
                order = self._rng(_WINDOW_ORDER, epoch, start).permutation(stop - start)
                merged[start:stop] = [merged[start + i] for i in order]
        return merged

    # ----------------------------------------------------------------- internals
    def _rng(self, *tags: int) -> np.random.Generator:
        return np.random.default_rng([self.seed, *tags])

    def _base_and_extra(self) -> tuple[int, int]:
        return divmod(self.batch_size, len(self._groups))

    def _shares(self, first_batch: int, count: int) -> np.ndarray:
        """How many indices each group gives to each of ``count`` batches from global batch ``first_batch``.

        The ``extra`` leftover places of every batch go round-robin: place p (counting from the very
        first batch of epoch 0) goes to group ``p % n_groups``.
        """
        n = len(self._groups)
        base, extra = self._base_and_extra()
        shares = np.full((n, count), base, dtype=np.int64)
        if extra:
            for b in range(count):
                start = (first_batch + b) * extra
                for p in range(start, start + extra):
                    shares[p % n, b] += 1
        return shares

    def _drawn_before(self, g: int, global_batch: int) -> int:
        """Indices group ``g`` gave to batches ``0 .. global_batch-1`` (closed form)."""
        n = len(self._groups)
        base, extra = self._base_and_extra()
        places = global_batch * extra
        return global_batch * base + places // n + (1 if g < places % n else 0)

    def _draw(self, g: int, start: int, count: int) -> np.ndarray:
        """Positions ``start .. start+count-1`` of group ``g``'s endless stream of shuffled indices."""
        members = self._groups[g]
        size = len(members)
        out = np.empty(count, dtype=np.int64)
        filled = 0
        pos = start
        while filled < count:
            k, offset = divmod(pos, size)
            perm = members[self._rng(_PERMUTATION, g, k).permutation(size)]
            take = min(size - offset, count - filled)
            out[filled : filled + take] = perm[offset : offset + take]
            filled += take
            pos += take
        return out
