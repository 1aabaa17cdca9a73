"""Each objective trains by default on data it is defined for: distillation on the general-domain
mix (English-only rows are targets for it), MEXMA, contrastive and the bottleneck on translation
pairs only (for them a sentence paired with itself is self-unmasking, a trivial positive or copying)."""

from __future__ import annotations

from pathlib import Path

import pytest
from sentence_transformers import SentenceTransformer

from babelspace.errors import TrainingError
from babelspace.training.config import DEFAULT_DATA, PARALLEL_DATA, TrainConfig
from babelspace.training.recipes import apply_recipe
from babelspace.training.setup.phases import prepare_data

PAIR_OBJECTIVES = ["mexma", "contrastive", "bottleneck"]


def test_default_data_per_objective() -> None:
    assert TrainConfig().data == list(DEFAULT_DATA)
    assert TrainConfig(objective="distill").data == list(DEFAULT_DATA)
    for objective in [*PAIR_OBJECTIVES, "mexma+distill", "distill+contrastive"]:
        assert TrainConfig(objective=objective).data == list(PARALLEL_DATA), objective
    assert apply_recipe("mexma-paper", {}).data == list(PARALLEL_DATA)
    assert apply_recipe("paper", {}).data == list(DEFAULT_DATA)
    assert TrainConfig(objective="mexma", data=["bible", "cldr:0.5"]).data == ["bible", "cldr:0.5"]


@pytest.mark.parametrize("objective", [*PAIR_OBJECTIVES, "mexma+distill"])
def test_english_only_sources_are_refused_for_pair_objectives(objective: str) -> None:
    with pytest.raises(TrainingError, match=r"--data mono-en:pydoc mono-en:pymsg: English-only") as exc:
        TrainConfig(objective=objective, data=["bible", "mono-en:pydoc:0.2", "mono-en:pymsg:0.1"])
    assert "\n" not in str(exc.value)
    TrainConfig(objective="distill", data=["bible", "mono-en:pydoc:0.2"])  # distillation takes them


def test_default_batches_of_pair_objectives_hold_no_self_pair(tiny_model_dir: Path) -> None:
    """The planned batches of every pair objective's default run (all its steps) hold no (s, s)
    pair; the distillation default's do (its English-only rows)."""
    student = SentenceTransformer(str(tiny_model_dir), device="cpu")
    for objective in PAIR_OBJECTIVES:
        cfg = TrainConfig(objective=objective, max_steps=60)
        rows = list(prepare_data(cfg, student).planned_pairs())
        assert len(rows) == 60 * cfg.pairs_per_step
        assert [p for p in rows if p.src == p.tgt] == [], objective
        assert all(p.src_lang != p.tgt_lang for p in rows), objective
