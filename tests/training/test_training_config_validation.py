"""TrainConfig checks its fields' types and the seed range when it is built, so Python, a config file
and the command line refuse the same values with the same one line: ``max_steps: 4.7``, ``langs:
[[de]]``, ``data: [[p.tsv]]`` and ``--seed`` outside numpy's 0..2**32-1 (train and align)."""

from __future__ import annotations

from pathlib import Path

import pytest

from babelspace.cli import main
from babelspace.errors import TrainingError
from babelspace.mining.align_dp import AlignConfig, AlignError
from babelspace.training.config import TrainConfig

BAD = [
    ({"max_steps": 4.7}, "--max-steps must be a whole number or unset (null), not 4.7"),
    ({"langs": [["de"]]}, "--langs must be a list of strings or unset (null), not [['de']]"),
    ({"data": [["p.tsv"]]}, "--data must be a list of strings or unset (null), not [['p.tsv']]"),
    ({"lr": "fast"}, "--lr must be a number or unset (null), not 'fast'"),
    ({"overwrite": 1}, "--overwrite must be true or false, not 1"),
    ({"seed": -1}, "--seed must be between 0 and 4294967295 (numpy's seed range), not -1"),
    ({"seed": 99999999999999999999}, "--seed must be between 0 and 4294967295"),
]


@pytest.mark.parametrize(("values", "message"), BAD)
def test_python_construction_refuses(values, message) -> None:
    with pytest.raises(TrainingError) as info:
        TrainConfig(**values)
    assert message in str(info.value)


@pytest.mark.parametrize(("values", "message"), BAD[:3])
def test_a_config_file_refuses_the_same_in_one_line(tmp_path, capsys, values, message) -> None:
    import yaml

    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(values))
    assert main(["train", "--config", str(path), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


@pytest.mark.parametrize("seed", ["-1", "99999999999999999999"])
def test_train_and_align_refuse_a_seed_numpy_cannot_take_before_any_work(tmp_path, capsys, seed) -> None:
    assert main(["train", "--seed", seed, "--out", str(tmp_path / "o")]) == 2
    assert "--seed must be between 0 and 4294967295" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()
    (tmp_path / "a.en").write_text("one\n")
    (tmp_path / "a.de").write_text("eins\n")
    argv = ["align", "--src", str(tmp_path / "a.en"), "--tgt", str(tmp_path / "a.de"), "--seed", seed]
    assert main([*argv, "--method", "gale-church", "--out", str(tmp_path / "x.tsv")]) == 2
    assert "--seed must be between 0 and 4294967295" in capsys.readouterr().err
    with pytest.raises(AlignError):
        AlignConfig(seed=int(seed))


def test_good_values_pass_and_yaml_numbers_without_a_dot_are_numbers(tmp_path) -> None:
    from babelspace.cli import build_parser
    from babelspace.cli.train import config_from_args

    assert TrainConfig(max_steps=4, langs=["de"], seed=0).max_steps == 4
    assert TrainConfig(langs="de, fr").langs == ["de", "fr"]  # as --langs de,fr reads
    path = Path(tmp_path / "c.yaml")
    path.write_text("lr: 1e-4\nmax_steps: 240\n")  # YAML 1.1 reads 1e-4 as a string
    cfg = config_from_args(build_parser().parse_args(["train", "--config", str(path)]))
    assert cfg.lr == 1e-4 and cfg.max_steps == 240
