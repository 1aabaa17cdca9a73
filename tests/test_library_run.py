"""``babelspace.training.run.run(cfg)`` is the product: the same config gives the same folder from
Python and from ``babelspace train`` (weights, card, run log), and the config resolves its own rules
(epochs vs steps) whoever builds it."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from babelspace.cli import main
from babelspace.training.config import DEFAULT_MAX_STEPS, TrainConfig, apply_recipe
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
