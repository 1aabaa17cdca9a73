"""The final table reports the trained model in both teacher spaces (as exported, and centred: the
export's mean taken out again) and the summary names the space the model is tuned for."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from babelspace.evaluation.held_out import table_from_vectors
from babelspace.training.output.final_table import tuned_space


def test_centred_column_takes_the_exported_mean_out() -> None:
    mu = np.array([0.0, 0.0, 2.0], dtype=np.float32)
    t_en = np.eye(3, dtype=np.float32)  # the third teacher vector is aligned with the mean: a hub
    centred = 0.5 * np.eye(3, dtype=np.float32)  # each student vector points at its own teacher vector
    after = (centred + mu, {"de": centred + mu})  # as exported: the mean added back
    other = (t_en, {"de": t_en})
    row = table_from_vectors(other, other, after, shift=mu)[0]
    assert row["after xx>T(en)"] == pytest.approx(100 / 3)  # raw queries all land on the hub
    assert row["centred xx>T(en)"] == pytest.approx(100.0)
    assert row["after xx>en"] == pytest.approx(100.0)  # own space: both sides carry the mean
    same = table_from_vectors(other, other, after)[0]  # no exported mean: both columns agree
    assert same["centred xx>T(en)"] == same["after xx>T(en)"]


def _cfg(**kw: object) -> SimpleNamespace:
    base = {
        "objective_names": ["distill"],
        "teacher_contrast": 1.0,
        "center_teacher": True,
        "export_space": "teacher",
        "teacher_contrast_space": "exported",
    }
    return SimpleNamespace(**{**base, **kw})


@pytest.mark.parametrize(
    ("cfg", "starts"),
    [
        (_cfg(), "teacher space as exported"),
        (_cfg(teacher_contrast_space="centred"), "teacher space centred"),
        (_cfg(teacher_contrast_space="centred", export_space="centred"), "teacher space as exported"),
        (_cfg(teacher_contrast=0.0), "teacher space, MSE only"),
        (_cfg(objective_names=["mexma"]), "own space"),
    ],
)
def test_summary_names_the_tuned_space(cfg: SimpleNamespace, starts: str) -> None:
    assert tuned_space(cfg).startswith(starts)


def test_export_flags_and_the_default_mix_reach_the_config() -> None:
    from babelspace.cli import build_parser
    from babelspace.cli.train import config_from_args
    from babelspace.training.config import DEFAULT_DATA

    def cfg(*argv: str):
        return config_from_args(build_parser().parse_args(["train", *argv]))

    default = cfg()
    assert default.data == list(DEFAULT_DATA)
    assert (default.teacher_contrast_space, default.export_norm) == ("exported", "teacher")
    given = cfg("--teacher-contrast-space", "centred", "--export-norm", "free", "--data", "bible")
    assert (given.teacher_contrast_space, given.export_norm, given.data) == ("centred", "free", ["bible"])
