"""The unmasking head of MEXMA: a transformer encoder over the masked token states whose position 0
holds a sentence vector, with a vocabulary projection tied to the student's input word embeddings.

Used by :mod:`babelspace.objectives.mexma` (Janeiro et al. 2024, arXiv 2409.12737, §3; the layout of
the official facebookresearch/mexma head).

The head is not exported: it exists only to train the encoder through the unmasking loss.

=================  ==========================================================
Inputs             ``states`` [B, L, H], ``attention_mask`` [B, L], ``positions``
                   bool [B, L] (the masked positions to predict)
Outputs            logits [N, V] for the N selected positions (row-major order)
=================  ==========================================================

Example::

    head = UnmaskingHead(hidden, embeddings.weight, num_layers=6, num_heads=8)
    logits = head(states, attention_mask, labels != IGNORE_INDEX)
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

__all__ = ["UnmaskingHead"]


class UnmaskingHead(torch.nn.Module):
    """Transformer encoder (post-LN with LayerNorm eps 1e-12, GELU, FFN ``ffn`` wide: 4×hidden when
    None, 3072 in the official MEXMA head; dropout on the two residual branches only, none in the
    attention or after the GELU: the layout of XLM-R's layer, which the official head is; the
    attention projections keep torch's initialisation) plus a vocabulary
    projection whose weight is the encoder's input embedding matrix (shared Parameter) and whose
    bias is its own. Logits are computed only where asked (the masked positions)."""

    def __init__(
        self,
        hidden_size: int,
        tied_weight: torch.nn.Parameter,
        num_layers: int = 6,
        num_heads: int = 8,
        dropout: float = 0.1,
        ffn: int | None = None,
    ) -> None:
        super().__init__()
        if hidden_size % num_heads:
            raise ValueError(f"hidden size {hidden_size} is not divisible by head_heads={num_heads}")
        if tied_weight.shape[1] != hidden_size:
            raise ValueError(f"embedding width {tied_weight.shape[1]} != hidden size {hidden_size}")
        device = tied_weight.device
        layer = torch.nn.TransformerEncoderLayer(
            d_model=hidden_size,
            nhead=num_heads,
            dim_feedforward=4 * hidden_size if ffn is None else ffn,
            dropout=dropout,
            activation="gelu",
            batch_first=True,
            layer_norm_eps=1e-12,  # XLM-R's (torch's default is 1e-5)
            device=device,
        )
        self.encoder = torch.nn.TransformerEncoder(layer, num_layers=num_layers, enable_nested_tensor=False)
        for lyr in self.encoder.layers:
            lyr.self_attn.dropout = 0.0  # attention dropout off; residual dropout = ``dropout``
            lyr.dropout = torch.nn.Identity()  # no dropout after the FFN's GELU, as in XLM-R's layer
        self.output = torch.nn.Linear(hidden_size, tied_weight.shape[0], device="meta")
        self.output.weight = tied_weight
        self.output.bias = torch.nn.Parameter(torch.zeros(tied_weight.shape[0], device=device))
        self.tied = True

    def untie(self) -> None:
        """Give the output layer its own trainable copy of the (tied) matrix; idempotent."""
        if self.tied:
            self.output.weight = torch.nn.Parameter(self.output.weight.detach().clone(), requires_grad=True)
            self.tied = False

    def forward(
        self,
        states: torch.Tensor,
        attention_mask: torch.Tensor,
        positions: torch.Tensor,
        vocab: torch.Tensor | None = None,
        frozen_tied: bool = False,
    ) -> torch.Tensor:
        """``states`` [B, L, H], ``attention_mask`` [B, L], ``positions`` bool [B, L] -> logits [N, V]
        for the N selected positions (in row-major order). ``vocab``: sorted token ids [V'] to score
        instead of the whole vocabulary (logits [N, V'], column j for id ``vocab[j]``).
        ``frozen_tied``: no gradient into a tied output weight (it is the encoder's word embeddings)."""
        hidden = self.encoder(states, src_key_padding_mask=~attention_mask.bool())
        selected = hidden[positions]
        weight, bias = self.output.weight, self.output.bias
        if frozen_tied and self.tied:
            weight = weight.detach()
        if vocab is not None:
            weight, bias = weight[vocab], bias[vocab]
        return F.linear(selected, weight.to(selected.dtype), bias.to(selected.dtype))
