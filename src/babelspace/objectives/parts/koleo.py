"""KoLeo regulariser (Kozachenko-Leonenko differential-entropy estimator).

Introduced for self-supervised vision in DINOv2 (Oquab et al. 2023, arXiv 2304.07193, §4
"KoLeo regularizer") and used by MEXMA (Janeiro et al. 2024, arXiv 2409.12737, §3, "KoLeo loss")
on the L2-normalised sentence vectors of each language to spread them over the sphere: a
non-contrastive alignment loss alone tends to collapse the space. For a batch x_1..x_n,

    L_koleo = − 1/n · Σ_i log( min_{j≠i} ||x̂_i − x̂_j|| + ε ),     x̂ = x / ||x||

It is computed in float32 whatever the input dtype (the log of small distances is where half
precision fails). Duplicate vectors give a distance of 0; the distance is clamped below at ε so
the value stays finite (−log 2ε) and the gradient is finite (zero for that pair).

=================  ==========================================================
Inputs             ``x``: [n, d] vectors (any float dtype), n ≥ 2
Outputs            a scalar (float32); 0 when n < 2 (no neighbour to measure)
=================  ==========================================================

Example::

    koleo = KoLeoLoss()
    loss = mse + 0.01 * koleo(cls_vectors)
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

__all__ = ["KoLeoLoss", "koleo_loss"]


def koleo_loss(x: torch.Tensor, eps: float = 1e-8, normalize: bool = True) -> torch.Tensor:
    """−mean_i log(min_{j≠i} ||x̂_i − x̂_j|| + eps) over the rows of ``x`` (see module docstring)."""
    if x.dim() != 2:
        raise ValueError(f"koleo_loss expects [n, d] vectors, got shape {tuple(x.shape)}")
    x = x.float()
    if x.shape[0] < 2:
        return x.sum() * 0.0
    if normalize:
        x = F.normalize(x, p=2, dim=-1, eps=eps)
    with torch.no_grad():
        # Nearest neighbour of each row (excluding itself) by squared distance.
        sq = torch.cdist(x, x).pow_(2)
        sq.fill_diagonal_(float("inf"))
        nn_index = sq.argmin(dim=1)
    diff = x - x[nn_index]
    dist = diff.pow(2).sum(dim=-1).clamp_min(eps * eps).sqrt()
    return -torch.log(dist + eps).mean()


class KoLeoLoss(torch.nn.Module):
    """Module form of :func:`koleo_loss` (no parameters)."""

    def __init__(self, eps: float = 1e-8, normalize: bool = True) -> None:
        super().__init__()
        self.eps = eps
        self.normalize = normalize

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return koleo_loss(x, eps=self.eps, normalize=self.normalize)

    def extra_repr(self) -> str:
        return f"eps={self.eps}, normalize={self.normalize}"
