"""Token ids of texts as the student's ``preprocess`` makes them, kept without their padding: how the
token cache (`babelspace.data.token_cache`) encodes texts, the key that names the tokenizer, length
and prompt that made them, and the padded tensors built back from them for a batch.

- `encode_ids`: the fast tokenizer's batch encoding with the call sentence-transformers makes
  (special tokens, ``truncation="longest_first"`` at the model's max length), unpadded: one flat
  int32 array and each text's length.
- `tokenizer_key`: a hash of the fast tokenizer's full definition (its serialised pipeline and
  vocabulary, truncation and padding state left out), its class, truncation side and special-token
  splitting, the max length and the prompt: a cache made for one never serves another.
- `IdLayout`: the features ``preprocess(texts)`` returns, rebuilt from cached ids: ``input_ids``
  and ``attention_mask`` (int64, padded to the batch's longest on the tokenizer's padding side with
  its pad id), ``token_type_ids`` (zeros) when the tokenizer returns them, and the non-tensor
  entries (``modality``). `IdLayout.difference` compares them with ``preprocess`` itself on sample
  texts; a model whose features they do not reproduce is never served from the cache.
- `CachedIds`: one batch's ids by text, which `babelspace.objectives.base.Objective.tokenize` reads
  instead of tokenizing when every text it is given is there.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import xxhash
from sentence_transformers import SentenceTransformer

from babelspace.models.encoder import tokenize

__all__ = ["CachedIds", "IdLayout", "encode_ids", "tokenizer_key"]

#: Bumped when what `encode_ids` stores or `tokenizer_key` covers changes: older caches are not reused.
KEY_VERSION = 1
#: The tensors `IdLayout` can rebuild (any other in ``preprocess``'s output: not served from ids).
_TENSORS = ("input_ids", "attention_mask", "token_type_ids")
_PROBE = ["a", "a b c"]  # two texts of different lengths: the probe's batch is padded


def encode_ids(tokenizer: Any, texts: Sequence[str], max_length: int) -> tuple[np.ndarray, np.ndarray]:
    """``(ids, lengths)``: the token ids of ``texts`` one after the other (int32) and the number of
    each text's ids (int64), with the special tokens and truncated at ``max_length`` as
    ``preprocess`` tokenizes them (without its padding)."""
    rows = tokenizer(
        list(texts),
        truncation="longest_first",
        max_length=max_length,
        return_attention_mask=False,
        return_token_type_ids=False,
    )["input_ids"]
    lengths = np.fromiter(map(len, rows), dtype=np.int64, count=len(rows))
    ids = np.fromiter(itertools.chain.from_iterable(rows), dtype=np.int64, count=int(lengths.sum()))
    if len(ids) and (ids.min() < 0 or ids.max() > np.iinfo(np.int32).max):
        raise ValueError("token ids outside int32")
    return ids.astype(np.int32), lengths


def tokenizer_key(model: SentenceTransformer, prompt: str) -> str | None:
    """The cache key of ``model``'s tokenizer at its max length with ``prompt`` (None: not a fast
    tokenizer, whose definition cannot be hashed)."""
    tok = model.tokenizer
    if not getattr(tok, "is_fast", False):
        return None
    spec = json.loads(tok.backend_tokenizer.to_str())
    spec.pop("truncation", None)  # set by each call, not part of what the tokenizer is
    spec.pop("padding", None)
    head = [
        KEY_VERSION,
        type(tok).__name__,
        int(model.max_seq_length),
        prompt,
        getattr(tok, "truncation_side", "right"),
        bool(getattr(tok, "split_special_tokens", False)),
    ]
    h = xxhash.xxh3_128(json.dumps(head).encode())
    h.update(json.dumps(spec, sort_keys=True).encode())
    return h.hexdigest()


@dataclass(frozen=True)
class IdLayout:
    """How a batch of cached ids becomes ``preprocess``'s features for one model."""

    pad_id: int
    left: bool  # the tokenizer pads on the left
    keys: tuple[str, ...]  # the tensors, in preprocess's order
    extras: Mapping[str, Any] = field(default_factory=dict)  # its non-tensor entries

    @classmethod
    def of(cls, model: SentenceTransformer) -> IdLayout | str:
        """The layout of ``model``'s features, or why they cannot be rebuilt from ids."""
        tok = model.tokenizer
        if getattr(tok, "pad_token_id", None) is None:
            return "its tokenizer has no pad token"
        probe = tokenize(model, list(_PROBE))
        keys = tuple(k for k, v in probe.items() if isinstance(v, torch.Tensor))
        other = [k for k in keys if k not in _TENSORS]
        if "input_ids" not in keys or other:
            return f"its features hold {', '.join(other) or 'no input_ids'}"
        extras = {k: v for k, v in probe.items() if not isinstance(v, torch.Tensor)}
        return cls(int(tok.pad_token_id), getattr(tok, "padding_side", "right") == "left", keys, extras)

    def features(self, rows: Sequence[np.ndarray]) -> dict[str, Any]:
        """The features of a batch whose texts have the ids ``rows``, padded to the longest."""
        lengths = np.fromiter(map(len, rows), dtype=np.int64, count=len(rows))
        width = int(lengths.max()) if len(rows) else 0
        pos = np.arange(width)
        real = pos >= (width - lengths)[:, None] if self.left else pos < lengths[:, None]
        ids = np.full((len(rows), width), self.pad_id, dtype=np.int64)
        ids[real] = np.concatenate(rows) if len(rows) else np.zeros(0, dtype=np.int64)
        arrays = {"input_ids": ids, "attention_mask": real, "token_type_ids": np.zeros_like(real)}
        # built in numpy (torch's own fills start its thread pool: far slower for these sizes)
        tensors = {k: torch.from_numpy(arrays[k].astype(np.int64, copy=False)) for k in self.keys}
        return {**tensors, **self.extras}

    def difference(
        self, model: SentenceTransformer, texts: Sequence[str], rows: Sequence[np.ndarray]
    ) -> str | None:
        """None when `features` of ``rows`` equal ``preprocess(texts)`` (``texts`` with the prompt
        prepended), else what differs."""
        want = dict(tokenize(model, list(texts)))
        got = self.features(rows)
        if set(got) != set(want):
            return f"features {sorted(want)}, rebuilt {sorted(got)}"
        for key, value in want.items():
            mine = got[key]
            if not isinstance(value, torch.Tensor):
                if mine != value:
                    return f"{key} is {value!r}, rebuilt {mine!r}"
            elif value.dtype != mine.dtype or value.shape != mine.shape or not torch.equal(value, mine):
                return f"{key} differs ({tuple(value.shape)} {value.dtype}, rebuilt {tuple(mine.shape)} {mine.dtype})"
        return None


@dataclass
class CachedIds:
    """One batch's token ids by text (as the cache stores them: prompt and special tokens included)."""

    ids: dict[str, np.ndarray]
    layout: IdLayout

    def features(self, texts: Sequence[str]) -> dict[str, Any] | None:
        """The features of ``texts`` from their ids; None when one of them is not in the batch."""
        try:
            rows = [self.ids[t] for t in texts]
        except KeyError:
            return None
        return self.layout.features(rows)
