"""Input noise for denoising auto-encoding: token masking and token dropping on the encoder's input.

SONAR (Duquenne, Schwenk & Sagot 2023, arXiv 2308.11466, §3) trains its encoder-decoder with a
denoising auto-encoding task besides translation: the encoder reads a noised sentence, the decoder
must write the clean one. Here each real, non-special token (the model's prompt included among the
protected ones) is, independently with probability ``ratio``, noised: dropped with probability
``drop_share``, otherwise replaced by the mask token (dropped as well when the tokenizer has none).
Rows are re-packed to the left after dropping and padded with ``pad_id``; every row keeps at least
its special tokens, so no row becomes empty. Only the encoder's input is noised: the decoder's
targets stay the clean tokens (:mod:`babelspace.objectives.bottleneck`).

=================  ==========================================================
Inputs             ``input_ids`` [B, L], ``attention_mask`` [B, L] (0 = padding),
                   ``protected`` [B, L] (True: never noised: special and prompt tokens)
Outputs            ``(input_ids, attention_mask)`` of the noised rows, [B, L'] with L' <= L
=================  ==========================================================
"""

from __future__ import annotations

import torch

__all__ = ["noise_tokens"]


def noise_tokens(
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    protected: torch.Tensor,
    ratio: float,
    mask_id: int | None,
    pad_id: int,
    drop_share: float = 0.5,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Mask or drop ``ratio`` of the unprotected real tokens (module docstring). ``generator`` (a CPU
    generator) makes the draw reproducible; without it the global RNG is used."""
    if not 0.0 <= ratio < 1.0:
        raise ValueError(f"noise ratio must be in [0, 1), not {ratio}")
    if not 0.0 <= drop_share <= 1.0:
        raise ValueError(f"drop_share must be in [0, 1], not {drop_share}")
    if ratio == 0.0:
        return input_ids, attention_mask
    device = input_ids.device
    real = attention_mask.bool().cpu()
    noisable = real & ~protected.bool().cpu()
    shape = input_ids.shape
    hit = noisable & (torch.rand(shape, generator=generator) < ratio)
    drop = hit & (torch.rand(shape, generator=generator) < drop_share)
    if mask_id is None:
        drop = hit
    ids = input_ids.cpu().masked_fill(hit & ~drop, int(mask_id) if mask_id is not None else 0)
    keep = real & ~drop
    length = max(1, int(keep.sum(dim=1).max()))
    out_ids = torch.full((shape[0], length), pad_id, dtype=input_ids.dtype)
    out_attn = torch.zeros((shape[0], length), dtype=attention_mask.dtype)
    for row in range(shape[0]):
        kept = ids[row][keep[row]]
        out_ids[row, : len(kept)] = kept
        out_attn[row, : len(kept)] = 1
    return out_ids.to(device), out_attn.to(device)
