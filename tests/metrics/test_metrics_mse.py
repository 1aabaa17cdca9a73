"""MSE to teacher: both conventions."""

from __future__ import annotations

import numpy as np
import pytest

from babelspace.metrics.mse import elementwise_mse_x100, mean_squared_l2, mse_to_teacher


def test_hand_computed() -> None:
    teacher = np.array([[0.0, 0.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0]])
    student = np.array([[1.0, 0.0, 0.0, 0.0], [1.0, 1.0, 3.0, 1.0]])
    # squared distances 1 and 4
    assert mean_squared_l2(student, teacher) == pytest.approx(2.5)
    assert elementwise_mse_x100(student, teacher) == pytest.approx(100 * 5 / 8)
    res = mse_to_teacher(student, teacher)
    assert res.elementwise_mse_x100 == pytest.approx(res.mean_squared_l2 / res.dim * 100)
    assert (res.n, res.dim) == (2, 4)


def test_shape_mismatch() -> None:
    with pytest.raises(ValueError):
        mean_squared_l2(np.zeros((2, 3)), np.zeros((2, 4)))
