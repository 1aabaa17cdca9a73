"""Token masking for masked-language-model objectives (BERT, Devlin et al. 2019, §3.1 "Task #1";
rates as used by MEXMA, Janeiro et al. 2024, arXiv 2409.12737, §3/§4: 40% of the tokens).

Of the maskable tokens (not padding, not special tokens such as CLS/BOS, EOS/SEP, PAD, and
optionally not the prompt), a fraction ``ratio`` is selected. ``selection="exact"`` (the default):
per sequence, ``ratio · n`` of its n maskable tokens, the count rounded stochastically (so the
expected ratio is exact and short sequences are not biased upwards). ``selection="bernoulli"``: each
maskable token independently with probability ``ratio`` (the official MEXMA collator, after
transformers' ``DataCollatorForLanguageModeling``), so a sequence's count varies. Selected tokens become the mask token with probability 0.8, a random
non-special token with probability 0.1, and stay unchanged with probability 0.1. Labels hold the
original id at selected positions and ``-100`` (ignored by cross-entropy) elsewhere. At least one
token per batch is selected whenever the batch has a maskable token, so the loss is never empty.

=================  ==========================================================
Inputs             ``input_ids`` [B, L]; ``attention_mask`` [B, L] (0 = padding);
                   special tokens by ``special_tokens_mask`` [B, L] (1 = special)
                   and/or by ``special_ids``
Outputs            ``(masked_ids, labels)``, both [B, L] int64
=================  ==========================================================

Example::

    masked, labels = mask_tokens(ids, attn, tok.mask_token_id, vocab_size=len(tok),
                                 special_ids=tok.all_special_ids, ratio=0.4)
"""

from __future__ import annotations

from collections.abc import Iterable

import torch

__all__ = ["IGNORE_INDEX", "SELECTIONS", "mask_tokens", "maskable_positions", "special_or_prompt"]

#: Label of positions that do not count in the loss (``torch.nn.CrossEntropyLoss`` default).
IGNORE_INDEX = -100

#: How the masked positions are chosen (module docstring).
SELECTIONS = ("exact", "bernoulli")


def maskable_positions(
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor | None = None,
    special_tokens_mask: torch.Tensor | None = None,
    special_ids: Iterable[int] | None = None,
) -> torch.Tensor:
    """Boolean [B, L]: positions that may be masked (real, non-special tokens)."""
    ok = torch.ones_like(input_ids, dtype=torch.bool)
    if attention_mask is not None:
        ok &= attention_mask.bool()
    if special_tokens_mask is not None:
        ok &= ~special_tokens_mask.bool()
    if special_ids is not None:
        ids = torch.as_tensor(sorted(set(special_ids)), dtype=input_ids.dtype, device=input_ids.device)
        if ids.numel():
            ok &= ~torch.isin(input_ids, ids)
    return ok


def special_or_prompt(
    input_ids: torch.Tensor, special_ids: Iterable[int], prompt_ids: list[int]
) -> torch.Tensor:
    """Boolean [B, L]: the special tokens, and the prompt's tokens (right after BOS) in the rows
    that start with the prompt: what masking and noising leave alone."""
    special = torch.isin(input_ids, torch.as_tensor(list(special_ids), device=input_ids.device))
    p = len(prompt_ids)
    if p and input_ids.shape[1] > p + 1:
        prompt = torch.as_tensor(prompt_ids, device=input_ids.device)
        rows = (input_ids[:, 1 : 1 + p] == prompt).all(dim=1)
        special[rows, 1 : 1 + p] = True
    return special


def mask_tokens(
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor | None,
    mask_token_id: int,
    vocab_size: int,
    ratio: float = 0.4,
    special_tokens_mask: torch.Tensor | None = None,
    special_ids: Iterable[int] | None = None,
    generator: torch.Generator | None = None,
    mask_prob: float = 0.8,
    random_prob: float = 0.1,
    selection: str = "exact",
) -> tuple[torch.Tensor, torch.Tensor]:
    """Mask ``ratio`` of the maskable tokens 80/10/10 (see module docstring).

    Random replacement tokens are drawn uniformly from ``[0, vocab_size)`` minus ``special_ids``.
    ``generator`` (a CPU generator) makes the draw reproducible; without it the global RNG is used.
    """
    if not 0.0 < ratio <= 1.0:
        raise ValueError(f"mask ratio must be in (0, 1], not {ratio}")
    if mask_prob < 0 or random_prob < 0 or mask_prob + random_prob > 1:
        raise ValueError("mask_prob and random_prob must be >= 0 and sum to at most 1")
    if selection not in SELECTIONS:
        raise ValueError(f"selection must be one of {SELECTIONS}, not {selection!r}")
    device = input_ids.device
    special_list = sorted(set(special_ids or ()))
    maskable = maskable_positions(input_ids, attention_mask, special_tokens_mask, special_list).cpu()
    bsz, length = input_ids.shape
    select = _select_exact if selection == "exact" else _select_bernoulli
    selected = select(maskable, ratio, generator)

    roll = torch.rand((bsz, length), generator=generator)
    to_mask = selected & (roll < mask_prob)
    to_random = selected & (roll >= mask_prob) & (roll < mask_prob + random_prob)

    allowed = torch.ones(vocab_size, dtype=torch.bool)
    for sid in special_list:
        if 0 <= sid < vocab_size:
            allowed[sid] = False
    allowed_ids = torch.nonzero(allowed).squeeze(1)
    if len(allowed_ids):
        random_ids = allowed_ids[torch.randint(len(allowed_ids), (bsz, length), generator=generator)]
    else:  # nothing to draw from: "random" tokens stay unchanged
        random_ids, to_random = input_ids.cpu(), torch.zeros_like(to_random)

    selected, to_mask, to_random, random_ids = (
        t.to(device) for t in (selected, to_mask, to_random, random_ids)
    )
    masked = input_ids.clone()
    masked[to_mask] = mask_token_id
    masked[to_random] = random_ids.to(input_ids.dtype)[to_random]
    labels = torch.full_like(input_ids, IGNORE_INDEX)
    labels[selected] = input_ids[selected]
    return masked, labels


def _select_exact(maskable: torch.Tensor, ratio: float, generator: torch.Generator | None) -> torch.Tensor:
    """Per sequence, k_i = floor(ratio * n_i + u) of its n_i maskable positions, uniformly at random;
    at least one in the batch when it has a maskable position."""
    bsz, length = maskable.shape
    scores = torch.rand((bsz, length), generator=generator)
    scores[~maskable] = 2.0  # never chosen before a maskable position
    n = maskable.sum(dim=1)
    k = torch.floor(ratio * n.float() + torch.rand((bsz,), generator=generator)).long()
    k = torch.minimum(k, n)
    if int(k.sum()) == 0 and int(n.sum()) > 0:
        k[int(torch.nonzero(n)[0])] = 1
    rank = scores.argsort(dim=1).argsort(dim=1)
    return (rank < k.unsqueeze(1)) & maskable


def _select_bernoulli(
    maskable: torch.Tensor, ratio: float, generator: torch.Generator | None
) -> torch.Tensor:
    """Each maskable position with probability ``ratio``, drawn again while the batch has none
    selected (as the official MEXMA collator), when it has a maskable position."""
    while True:
        selected = (torch.rand(maskable.shape, generator=generator) < ratio) & maskable
        if bool(selected.any()) or not bool(maskable.any()):
            return selected
