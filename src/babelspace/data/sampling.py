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
mixing the language pairs, each as often as it appears in the data. (This is not what
sentence-transformers' multilingual example does: there each batch comes from a single dataset, the
datasets picked in proportion to their size.) ``mode="random"`` is the same without length
bucketing (shuffled batches over the whole corpus, as MEXMA's official training code draws them).

Batches are computed on demand, one window of ``bucket_window`` (default 50) batches at a time
(`BalancedBatchSampler.batch` of a global step): the sampler holds the pairs' groups, lengths and
text ids as integer arrays (`PairArrays`, which a memory-mapped corpus provides without building a
pair object per row) and nothing per step. The swaps below look for partners inside the window;
until this sampler computed windows on demand they looked across the whole epoch, which gives the
same batches whenever no swap needs a partner outside its window (the test suite checks equality on
reference batches of the whole-epoch sampler).

With ``bucket_by_length=True``, every window of ``bucket_window`` batches is drawn at once; within each group the window's indices are sorted by source length (characters) and cut into
the batches in order, so each batch holds sentences of similar length (less padding) and still the
same number per group; the order of batches within the window is then shuffled.

A pair never appears twice in one batch while its group has at least as many pairs as its share of
a batch: copies from recycling are swapped with a nearby batch (`separate_repeats`).

``distinct_texts=True`` goes further: no two pairs of a batch share a text, across language pairs
(a source or target of one pair equal to a source or target of another). When every language is
paired with the same English version, the same English verse otherwise lands in one batch under
several languages (length bucketing lines the copies up), and its translations become false in-batch
negatives of each other, or near-zero KoLeo distances. A pair that clashes is swapped with a pair of
the *same group* in the nearest batch that can take it (`separate_shared_texts`), so the per-group
counts stay exact and a bucketed batch keeps pairs of similar length. Impossible only when the
texts are too few for a batch (then the clash stays and is counted in ``last_epoch_clashes``).

Group weights: ``group_key`` maps a pair to its group (default ``(src_lang, tgt_lang)``; e.g. the
pair's data source), and ``group_weights`` gives each group's share of a batch in proportion to its
weight (missing groups weigh 1; all 1 is the balanced sampler). The places of the stream of batches
are handed out one by one by the Sainte-Laguë divisor method (place after place to the group with the
smallest ``(c_g + 1/2) / w_g``, ties to the earlier group), which with equal weights is exactly the
round-robin above, and whose count per group after any number of places has a closed form
(`seats`), so a resumed run draws exactly the batches of the uninterrupted one.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from torch.utils.data import Sampler

from babelspace.data.apportionment import group_members, group_weight_array, seats
from babelspace.data.pairs import ParallelPair, text_ids
from babelspace.data.separation import separate_repeats, separate_shared_texts

__all__ = [
    "BalancedBatchSampler",
    "PairArrays",
    "pair_arrays",
]

logger = logging.getLogger(__name__)

# Tags that keep the random streams of different purposes apart.
_PERMUTATION, _WINDOW_ORDER = 0, 1


def _language_pair(pair: ParallelPair) -> tuple[str, str]:
    return (pair.src_lang, pair.tgt_lang)


@dataclass(frozen=True)
class PairArrays:
    """What the sampler looks at, as integer arrays (one row per pair): a corpus larger than RAM
    hands these over instead of pairs.

    ``groups[i]`` is the index of pair i's group in ``group_names``; ``lengths[i]`` its source
    length in characters; ``text_ids[i]`` (only for ``distinct_texts``) two integers equal for equal
    texts (its source and target; equal to each other when the pair's source is its target).
    """

    groups: np.ndarray
    group_names: list[Hashable]
    lengths: np.ndarray
    text_ids: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.groups)


def pair_arrays(
    pairs: Sequence[ParallelPair], key: Callable[[ParallelPair], Hashable], texts: bool
) -> PairArrays:
    """`PairArrays` of in-memory pairs: groups by ``key`` (names sorted when they sort, else in order
    of appearance), text ids only when ``texts``."""
    codes: dict[Hashable, int] = {}
    raw = np.fromiter((codes.setdefault(key(p), len(codes)) for p in pairs), dtype=np.int64, count=len(pairs))
    try:
        names = sorted(codes)
    except TypeError:
        names = list(codes)
    remap = np.empty(len(codes), dtype=np.int64)
    remap[[codes[k] for k in names]] = np.arange(len(names))
    lengths = np.fromiter((len(p.src) for p in pairs), dtype=np.int64, count=len(pairs))
    return PairArrays(remap[raw], names, lengths, text_ids(pairs) if texts else None)


class _TextIdRows:
    """``rows[i]`` -> the distinct text ids of pair i, as `separate_shared_texts` reads them."""

    def __init__(self, ids: np.ndarray) -> None:
        self.ids = ids

    def __getitem__(self, i: int) -> tuple[int, ...]:
        a, b = (int(x) for x in self.ids[i])
        return (a,) if a == b else (a, b)


class BalancedBatchSampler(Sampler[list[int]]):
    """Batches of indices into ``pairs``; use as ``DataLoader(dataset, batch_sampler=sampler)``.

    Args:
        pairs: the training pairs (only languages and source lengths are looked at), or their
            `PairArrays` (groups already assigned; then ``group_key`` is not used).
        batch_size: indices per batch.
        mode: ``"balanced"`` (same count per language pair in every batch), ``"proportional"``
            (one group) or ``"random"`` (one group, never length-bucketed: plain shuffled batches).
        bucket_by_length: group sentences of similar source length into the same batch.
        seed: everything random derives from it.
        num_batches: batches per epoch; default ``max(1, len(pairs) // batch_size)``.
        infinite: keep yielding, epoch after epoch, instead of stopping at the end of an epoch.
        bucket_window: batches drawn together (the unit of length bucketing and of the swaps that
            keep repeats and shared texts apart).
        distinct_texts: no two pairs of a batch share a source or target text (see module docstring);
            for objectives with in-batch negatives or KoLeo.
        group_key: the group of a pair in balanced mode (default ``(src_lang, tgt_lang)``).
        group_weights: a group's share of every batch is proportional to its weight (default 1 each).

    Batches are computed on demand, one window of ``bucket_window`` batches at a time, from
    ``(seed, step)`` alone (`batch`): nothing per step is planned ahead. ``state_dict()`` records the
    epoch and the number of batches already yielded in it. With a ``DataLoader`` using worker
    processes, pass the number of batches the loop actually consumed
    (``state_dict(batches_done=global_step)``).
    """

    def __init__(
        self,
        pairs: Sequence[ParallelPair] | PairArrays,
        batch_size: int,
        *,
        mode: Literal["balanced", "proportional", "random"] = "balanced",
        bucket_by_length: bool = False,
        seed: int = 0,
        num_batches: int | None = None,
        infinite: bool = False,
        bucket_window: int = 50,
        distinct_texts: bool = False,
        group_key: Callable[[ParallelPair], Hashable] | None = None,
        group_weights: Mapping[Hashable, float] | None = None,
    ) -> None:
        _check_arguments(len(pairs), batch_size, mode, bucket_window, group_key, group_weights)
        self.batch_size = batch_size
        self.mode = mode
        self.bucket_by_length = bucket_by_length and mode != "random"
        self.seed = seed
        self.infinite = infinite
        self.bucket_window = bucket_window
        self.num_pairs = len(pairs)
        self.num_batches = num_batches if num_batches is not None else max(1, len(pairs) // batch_size)
        if self.num_batches < 1:
            raise ValueError(f"num_batches must be >= 1, got {self.num_batches}")
        arrays = pairs if isinstance(pairs, PairArrays) else None
        if arrays is None:
            key = (group_key or _language_pair) if mode == "balanced" else _language_pair
            arrays = pair_arrays(pairs, key, distinct_texts)  # type: ignore[arg-type]
        self._lengths = arrays.lengths
        if mode == "balanced":
            self.group_names = list(arrays.group_names)
            self._groups = group_members(arrays.groups, len(self.group_names))
        else:
            self.group_names = [("*", "*")]
            self._groups = [np.arange(self.num_pairs, dtype=np.int64)]
        self._weights = group_weight_array(self.group_names, group_weights)
        self.distinct_texts = distinct_texts
        if distinct_texts and arrays.text_ids is None:
            raise ValueError("distinct_texts needs PairArrays with text_ids")
        self._texts = _TextIdRows(arrays.text_ids) if distinct_texts else None
        self.last_epoch_clashes = 0
        self.epoch = 0
        self.batch_index = 0
        self._window_cache: tuple[tuple[int, int], list[list[int]], int] | None = None
        self._perm_cache: dict[int, tuple[int, np.ndarray]] = {}
        logger.debug(
            "sampler: %d pairs, %d groups, %d batches of %d per epoch (%s%s)",
            self.num_pairs,
            len(self._groups),
            self.num_batches,
            batch_size,
            mode,
            ", bucketed" if self.bucket_by_length else "",
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
            "distinct_texts": self.distinct_texts,
            "group_weights": self._weights.tolist(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from a `state_dict`; the sampler must be built over the same pairs and settings."""
        for key, have in (
            ("batch_size", self.batch_size),
            ("num_pairs", self.num_pairs),
            ("mode", self.mode),
            ("distinct_texts", self.distinct_texts),
            ("group_weights", self._weights.tolist()),
        ):
            if key in state and state[key] != have:
                raise ValueError(f"sampler state has {key}={state[key]!r} but this sampler has {have!r}")
        self.seed = int(state["seed"])
        self._window_cache = None
        self._perm_cache = {}
        self.epoch = int(state["epoch"])
        self.batch_index = int(state["batch_index"])
        if self.batch_index >= self.num_batches:
            self.epoch += 1
            self.batch_index = 0

    def __iter__(self) -> Iterator[list[int]]:
        while True:
            while self.batch_index < self.num_batches:
                batch = self.batch(self.epoch * self.num_batches + self.batch_index)
                self.batch_index += 1
                yield batch
            self.epoch += 1
            self.batch_index = 0
            if not self.infinite:
                return

    def batch(self, step: int) -> list[int]:
        """The batch of global step ``step`` (0-based, counting across epochs): a pure function of
        the seed, the settings and ``step``; does not move the sampler."""
        epoch, b = divmod(step, self.num_batches)
        start = b - b % self.bucket_window
        return self._window(epoch, start)[0][b - start]

    def covers_all(self, steps: int) -> bool:
        """Whether the first ``steps`` batches hold every pair at least once, in closed form: the
        windows that end by ``steps`` take whole shuffled passes of every group's stream (the swaps
        move pairs between batches of one window only), so it suffices that they draw at least as
        many indices as every group has pairs. A plan that cycles a small corpus then uses exactly
        the corpus's texts, whatever its length."""
        epoch, b = divmod(max(0, steps), self.num_batches)
        complete = epoch * self.num_batches + b - b % self.bucket_window
        drawn = seats(complete * self.batch_size, self._weights)
        return all(int(drawn[g]) >= len(members) for g, members in enumerate(self._groups))

    def epoch_batches(self, epoch: int) -> list[list[int]]:
        """All batches of ``epoch`` (deterministic; does not move the sampler)."""
        out: list[list[int]] = []
        clashes = 0
        for start in range(0, self.num_batches, self.bucket_window):
            batches, left = self._window(epoch, start)
            out += batches
            clashes += left
        self.last_epoch_clashes = clashes
        if clashes:
            logger.warning(
                "sampler epoch %d: %d pairs still share a text with another pair of their batch "
                "(too few distinct texts for the batch size)",
                epoch,
                clashes,
            )
        return out

    # ----------------------------------------------------------------- internals
    def _window(self, epoch: int, start: int) -> tuple[list[list[int]], int]:
        """Batches ``start .. start+bucket_window-1`` of ``epoch`` (the last window may be shorter)
        and the shared-text clashes left in them; the last window is cached."""
        cached = self._window_cache
        if cached is not None and cached[0] == (epoch, start):
            return cached[1], cached[2]
        count = min(self.bucket_window, self.num_batches - start)
        first = epoch * self.num_batches + start
        shares = self._shares(first, count)  # [n_groups, count]
        group_parts: list[list[np.ndarray]] = []
        for g in range(len(self._groups)):
            drawn = self._draw(g, self._drawn_before(g, first), int(shares[g].sum()))
            if self.bucket_by_length:
                drawn = drawn[np.argsort(self._lengths[drawn], kind="stable")]
            parts = np.split(drawn, np.cumsum(shares[g])[:-1])
            separate_repeats(parts)
            group_parts.append(parts)
        left = 0
        if self._texts is not None:
            left = separate_shared_texts(group_parts, self._texts, self._lengths)
        merged = [np.concatenate([parts[b] for parts in group_parts]).tolist() for b in range(count)]
        if self.bucket_by_length:
            order = self._rng(_WINDOW_ORDER, epoch, start).permutation(count)
            merged = [merged[i] for i in order]
        self._window_cache = ((epoch, start), merged, left)
        return merged, left

    def _rng(self, *tags: int) -> np.random.Generator:
        return np.random.default_rng([self.seed, *tags])

    def _shares(self, first_batch: int, count: int) -> np.ndarray:
        """How many indices each group gives to each of ``count`` batches from global batch ``first_batch``.

        The places of the stream of batches (counting from the very first batch of epoch 0) are
        handed out by `seats`; with equal weights every group gets ``batch_size // n_groups`` and
        the leftover places go round-robin.
        """
        bounds = [seats((first_batch + b) * self.batch_size, self._weights) for b in range(count + 1)]
        return np.diff(np.stack(bounds, axis=1), axis=1)

    def _drawn_before(self, g: int, global_batch: int) -> int:
        """Indices group ``g`` gave to batches ``0 .. global_batch-1`` (closed form)."""
        return int(seats(global_batch * self.batch_size, self._weights)[g])

    def _permutation(self, g: int, k: int) -> np.ndarray:
        """Group ``g``'s ``k``-th shuffled pass over its members (the latest one is kept)."""
        cached = self._perm_cache.get(g)
        if cached is None or cached[0] != k:
            members = self._groups[g]
            cached = (k, members[self._rng(_PERMUTATION, g, k).permutation(len(members))])
            self._perm_cache[g] = cached
        return cached[1]

    def _draw(self, g: int, start: int, count: int) -> np.ndarray:
        """Positions ``start .. start+count-1`` of group ``g``'s endless stream of shuffled indices."""
        size = len(self._groups[g])
        out = np.empty(count, dtype=np.int64)
        filled = 0
        pos = start
        while filled < count:
            k, offset = divmod(pos, size)
            perm = self._permutation(g, k)
            take = min(size - offset, count - filled)
            out[filled : filled + take] = perm[offset : offset + take]
            filled += take
            pos += take
        return out


def _check_arguments(
    n: int,
    batch_size: int,
    mode: str,
    bucket_window: int,
    group_key: object,
    group_weights: object,
) -> None:
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    if n == 0:
        raise ValueError("cannot sample batches from an empty list of pairs")
    if mode not in ("balanced", "proportional", "random"):
        raise ValueError(f"mode must be 'balanced', 'proportional' or 'random', got {mode!r}")
    if bucket_window < 1:
        raise ValueError(f"bucket_window must be >= 1, got {bucket_window}")
    if mode != "balanced" and (group_key is not None or group_weights is not None):
        raise ValueError("group_key and group_weights need mode='balanced'")
