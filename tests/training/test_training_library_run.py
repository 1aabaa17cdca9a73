"""``babelspace.training.run.run(cfg)`` is the product: the same config gives the same folder from
Python and from ``babelspace train`` (weights, card, run log), and the config resolves its own rules
(epochs vs steps) whoever builds it."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from babelspace.cli import main
from babelspace.training.config import DEFAULT_MAX_STEPS, TrainConfig
from babelspace.training.recipes import apply_recipe
from babelspace.training.run import run

PAIRS = [(f"the house number {i} is red", f"das Haus Nummer {i} ist rot") for i in range(120)]


def test_epochs_decide_the_length_from_python_too() -> None:
    assert TrainConfig().max_steps == DEFAULT_MAX_STEPS
    assert TrainConfig(epochs=3).max_steps is None  # was: 120 steps, the epochs silently ignored
    assert TrainConfig(epochs=3, max_steps=7).max_steps == 7  # both given: the step count caps
    assert apply_recipe("babelspace", {"epochs": 2.0}).max_steps is None
    assert apply_recipe("babelspace", {"epochs": 2.0, "max_steps": 5}).max_steps == 5


def _flags(tmp_path: Path, teacher: Path, student: Path, out: Path) -> list[str]:
    tsv = tmp_path / "pairs.tsv"
    tsv.write_text("".join(f"{en}\t{de}\n" for en, de in PAIRS), encoding="utf-8")
    return ["--data", str(tsv), "--tgt-lang", "de", "--teacher", str(teacher), "--student", str(student),
            "--out", str(out), "--batch-size", "8", "--max-steps", "2", "--eval-every", "2",
            "--dev-pairs", "12", "--max-seq-length", "16", "--projection-fit-pairs", "32",
            "--cache-dir", str(tmp_path / "cache"), "--test-sentences", "0", "--threads", "1"]  # fmt: skip


def _cfg_from(flags: list[str]) -> TrainConfig:
    from babelspace.cli import build_parser
    from babelspace.cli.train import config_from_args

    return config_from_args(build_parser().parse_args(["train", *flags]))


def test_python_run_and_cli_run_write_the_same_folder(
    tmp_path: Path, tiny_teacher_dir: Path, tiny_nodrop_dir: Path, capsys
) -> None:
    cli_out, py_out = tmp_path / "cli", tmp_path / "py"
    cli_flags = _flags(tmp_path, tiny_teacher_dir, tiny_nodrop_dir, cli_out)
    assert main(["train", *cli_flags]) == 0
    capsys.readouterr()
    py_flags = _flags(tmp_path, tiny_teacher_dir, tiny_nodrop_dir, py_out)
    result = run(_cfg_from(py_flags), command=shlex.join(["babelspace", "train", *py_flags]))
    assert result.config is not None and result.config.max_steps == 2
    assert (cli_out / "model.safetensors").read_bytes() == (py_out / "model.safetensors").read_bytes()
    logs = [json.loads((d / "babelspace_training.json").read_text()) for d in (cli_out, py_out)]
    for log in logs:
        log["config"].pop("output")
        log.pop("timings", None)
    assert logs[0]["config"] == logs[1]["config"]
    assert logs[0]["history"] == logs[1]["history"]
    cards = [(d / "README.md").read_text(encoding="utf-8").replace(str(d), "OUT") for d in (cli_out, py_out)]
    assert cards[0] == cards[1]


def test_a_config_file_sets_options_and_flags_override_it(tmp_path: Path) -> None:
    run_yaml = tmp_path / "run.yaml"
    run_yaml.write_text("recipe: babelspace\nmax_steps: 240\nlr: 5.0e-5\nlangs: [de, fr]\n", encoding="utf-8")
    cfg = _cfg_from(["--config", str(run_yaml), "--lr", "1e-4"])
    assert (cfg.max_steps, cfg.lr, cfg.langs) == (240, 1e-4, ["de", "fr"])
    again = tmp_path / "cfg.json"
    again.write_text(json.dumps({"config": cfg.to_dict(), "history": []}), encoding="utf-8")  # a run log
    assert _cfg_from(["--config", str(again)]).to_dict() == cfg.to_dict()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("max_stepz: 3\n", "unknown training options: max_stepz"),
        ("a: [\n", "not valid YAML"),
        ("- 1\n", "a mapping"),
    ],
)
def test_a_bad_config_file_is_one_line_naming_it(tmp_path: Path, text: str, message: str, capsys) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(text, encoding="utf-8")
    assert main(["train", "--config", str(bad)]) == 2
    err = capsys.readouterr().err
    assert f"--config {bad}" in err and message in err and len(err.strip().splitlines()) == 1
