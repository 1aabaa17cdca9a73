"""TrainConfig validation, recipe presets, the learning-rate schedule and the train CLI's parsing."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from transformers import get_linear_schedule_with_warmup

from babelspace.cli import build_parser
from babelspace.cli.train import config_from_args
from babelspace.errors import TrainingError
from babelspace.training.config import TrainConfig
from babelspace.training.setup.phases import lr_schedule


def _cfg(*argv: str) -> TrainConfig:
    return config_from_args(build_parser().parse_args(["train", *argv]))


@pytest.mark.parametrize(
    ("field", "value", "flag"),
    [
        ("batch_size", 0, "--batch-size"),
        ("eval_every", 0, "--eval-every"),
        ("lr", -1.0, "--lr"),
        ("lr", float("nan"), "--lr"),
        ("max_pairs", -5, "--max-pairs"),
        ("threads", -1, "--threads"),
        ("projection_fit_pairs", 0, "--projection-fit-pairs"),
        ("max_seq_length", 0, "--max-seq-length"),
        ("max_steps", -1, "--max-steps"),
        ("dev_pairs", -1, "--dev-pairs"),
        ("precision", "fp8", "--precision"),
        ("recipe", "fast", "--recipe"),
        ("decoder_vocab", -1, "--decoder-vocab"),
        ("decoder_dropout", 1.0, "--decoder-dropout"),
    ],
)
def test_invalid_values_are_refused_naming_the_flag(field, value, flag) -> None:
    with pytest.raises(TrainingError, match=flag):
        TrainConfig(**{field: value})


def test_embeddings_train_for_all_but_plain_distillation() -> None:
    assert TrainConfig().frozen_embeddings
    assert not TrainConfig(objective="mexma").frozen_embeddings
    assert not TrainConfig(objective="contrastive").frozen_embeddings
    assert not TrainConfig(objective="mexma+distill").frozen_embeddings
    assert TrainConfig(objective="mexma", freeze_embeddings=True).frozen_embeddings


def test_recipes_set_their_options_and_flags_override_them() -> None:
    default = _cfg()
    assert default.recipe == "babelspace" and default.teacher_contrast == 1.0 and default.center_teacher
    paper = _cfg("--recipe", "paper")
    assert paper.teacher_contrast == 0 and not paper.center_teacher and not paper.frozen_embeddings
    assert paper.learning_rate() == 2e-5 and paper.batch_size == 64 and paper.projection == "auto"
    assert _cfg("--recipe", "paper", "--lr", "1e-4", "--batch-size", "8").learning_rate() == 1e-4
    mexma = _cfg("--recipe", "mexma-paper")
    assert mexma.objective == "mexma" and mexma.schedule == "cosine" and mexma.grad_clip == 1.2
    assert mexma.max_seq_length == 200 and mexma.warmup_steps(100) == 30
    assert _cfg("--epochs", "2").max_steps is None  # --epochs decides the length


def test_help_says_each_recipe_in_one_line_and_links_what_it_sets(capsys) -> None:
    from babelspace.training.recipes import RECIPE_SUMMARIES, RECIPES

    with pytest.raises(SystemExit):
        build_parser().parse_args(["train", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert set(RECIPE_SUMMARIES) == set(RECIPES)
    assert all(f"{name}: {' '.join(line.split())}" in text for name, line in RECIPE_SUMMARIES.items())
    assert "docs/training.md, 'Recipes'" in text
    table = (Path(__file__).resolve().parents[2] / "docs" / "training.md").read_text(encoding="utf-8")
    assert all(f"| `{name}`" in table for name in RECIPES)  # where each preset's settings are listed


def _factors(cfg: TrainConfig, n: int) -> list[float]:
    f = lr_schedule(cfg, n)
    return [f(i) for i in range(n + 1)]


def test_default_schedule_is_transformers_linear_warmup_bit_for_bit() -> None:
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    ref = get_linear_schedule_with_warmup(opt, 10, 120)
    expected = [ref.lr_lambdas[0](i) for i in range(121)]
    assert _factors(TrainConfig(), 120) == expected


def test_mexma_schedule_warms_up_from_a_tenth_then_cosine() -> None:
    f = _factors(TrainConfig(schedule="cosine", warmup_ratio=0.3, warmup_start_factor=0.1), 100)
    assert f[0] == pytest.approx(0.1) and f[30] == pytest.approx(1.0)
    assert f[65] == pytest.approx(0.5 * (1 + math.cos(math.pi * 0.5))) and f[100] == pytest.approx(0.0)


def test_deepspeed_configs_are_refused_up_front_fsdp_is_accepted() -> None:
    from babelspace.training.sharded import check_sharding

    class Fake:
        distributed_type = "DistributedType.DEEPSPEED"

    with pytest.raises(TrainingError, match="DeepSpeed.*FSDP"):
        check_sharding(Fake())
    Fake.distributed_type = "DistributedType.FSDP"
    assert check_sharding(Fake()) is True


def test_bottleneck_decoder_flags_reach_the_config() -> None:
    cfg = _cfg("--objective", "bottleneck", "--decoder-vocab", "8000", "--decoder-dropout", "0")
    assert (cfg.decoder_vocab, cfg.decoder_dropout) == (8000, 0.0)
    assert (_cfg().decoder_vocab, _cfg().decoder_dropout) == (0, 0.1)


def test_decoder_vocab_too_small_fails_at_construction() -> None:
    with pytest.raises(TrainingError, match="--decoder-vocab must be 0"):
        TrainConfig(objective="bottleneck", decoder_vocab=3)
    assert TrainConfig(objective="bottleneck", decoder_vocab=4).decoder_vocab == 4
