from __future__ import annotations

import math

import pytest
import torch

from babelspace.objectives.parts.koleo import KoLeoLoss, koleo_loss


def test_koleo_matches_hand_computation() -> None:
    # Normalised: a=(1,0), b=(0,1), c=(0.6,0.8), d=(-1,0).
    x = torch.tensor([[1.0, 0.0], [0.0, 2.0], [3.0, 4.0], [-1.0, 0.0]])
    # Nearest neighbours: a->c sqrt(.8), b->c sqrt(.4), c->b sqrt(.4), d->b sqrt(2).
    nn = [math.sqrt(0.8), math.sqrt(0.4), math.sqrt(0.4), math.sqrt(2.0)]
    expected = -sum(math.log(d + 1e-8) for d in nn) / 4
    assert koleo_loss(x).item() == pytest.approx(expected, rel=1e-5)
    assert KoLeoLoss()(x).item() == pytest.approx(expected, rel=1e-5)


def test_koleo_three_points_without_normalisation() -> None:
    x = torch.tensor([[0.0, 0.0], [3.0, 0.0], [0.0, 1.0]])
    # (0,0)->(0,1): 1; (3,0)->(0,0): 3; (0,1)->(0,0): 1.
    expected = -(math.log(1.0) + math.log(3.0) + math.log(1.0)) / 3
    assert koleo_loss(x, normalize=False).item() == pytest.approx(expected, abs=1e-6)


def test_koleo_is_scale_invariant_and_fp32() -> None:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(16, 8, generator=g)
    ref = koleo_loss(x)
    assert koleo_loss(7.5 * x).item() == pytest.approx(ref.item(), rel=1e-5)
    half = koleo_loss(x.half())
    assert half.dtype == torch.float32
    assert half.item() == pytest.approx(ref.item(), rel=1e-2)


def test_koleo_finite_for_duplicates() -> None:
    x = torch.tensor([[1.0, 2.0, 3.0], [1.0, 2.0, 3.0], [0.0, 1.0, 0.0]], requires_grad=True)
    loss = koleo_loss(x)
    assert torch.isfinite(loss)
    loss.backward()
    assert torch.isfinite(x.grad).all()
    # all rows identical: still finite
    y = torch.ones(5, 4, requires_grad=True)
    loss = koleo_loss(y)
    loss.backward()
    assert torch.isfinite(loss) and torch.isfinite(y.grad).all()


def test_koleo_spread_points_score_lower() -> None:
    g = torch.Generator().manual_seed(1)
    spread = torch.randn(32, 4, generator=g)
    clumped = torch.tensor([1.0, 0.0, 0.0, 0.0]) + 0.01 * torch.randn(32, 4, generator=g)
    assert koleo_loss(spread) < koleo_loss(clumped)


def test_koleo_gradient_pushes_neighbours_apart() -> None:
    x = torch.tensor([[1.0, 0.0], [0.99, 0.14], [-1.0, 0.0]], requires_grad=True)
    opt = torch.optim.SGD([x], lr=0.05)
    before = koleo_loss(x).item()
    for _ in range(5):
        opt.zero_grad()
        koleo_loss(x).backward()
        opt.step()
    assert koleo_loss(x).item() < before


def test_koleo_edge_cases() -> None:
    assert koleo_loss(torch.randn(1, 3)).item() == 0.0
    with pytest.raises(ValueError):
        koleo_loss(torch.randn(3))
