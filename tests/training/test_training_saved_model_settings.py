"""The saved model queries as the teacher does (max_seq_length, prompts), and a user's own corpus
gets told how much of it a run saw."""

from __future__ import annotations

import logging
from pathlib import Path
from types import SimpleNamespace

from sentence_transformers import SentenceTransformer

from babelspace.data.pairs import ReadReport
from babelspace.models.encoder import make_student
from babelspace.models.prompts import trained_prompts
from babelspace.training.config import TRAIN_MAX_SEQ_LENGTH, TrainConfig
from babelspace.training.output.export import export_student
from babelspace.training.output.run_log import train_result


def test_trained_prompts_map_every_name_to_the_trained_prompt() -> None:
    e5 = {"query": "query: ", "passage": "passage: ", "document": "passage: "}
    assert trained_prompts(e5, "query: ") == {"document": "query: ", "passage": "query: ", "query": "query: "}
    assert trained_prompts({}, "") == {} and trained_prompts(None, "") == {}
    assert trained_prompts({}, "q: ") == {"document": "q: ", "query": "q: "}


def test_max_seq_length_unset_trains_at_128() -> None:
    assert TrainConfig().max_seq_length is None
    assert TrainConfig().train_seq_length == TRAIN_MAX_SEQ_LENGTH == 128
    assert TrainConfig(max_seq_length=64).train_seq_length == 64


def test_export_saves_the_given_length_and_trained_prompts(
    tiny_model_dir: Path, tiny_teacher_dir: Path, tmp_path: Path
) -> None:
    teacher = SentenceTransformer(str(tiny_teacher_dir), device="cpu")
    student = make_student(str(tiny_model_dir), teacher, projection="always")
    student.prompts = {"query": "query: ", "document": "passage: "}
    student.default_prompt_name = "query"
    student.max_seq_length = 16
    cfg = TrainConfig(teacher=str(tiny_teacher_dir), student=str(tiny_model_dir), output=tmp_path / "out")
    export_student(student, cfg, {"step": 0}, max_seq_length=40)
    saved = SentenceTransformer(str(tmp_path / "out"), device="cpu")
    assert saved.max_seq_length == 40
    assert saved.prompts["document"] == saved.prompts["query"] == "query: "
    # the student itself trains on at its own settings
    assert student.max_seq_length == 16 and student.prompts["document"] == "passage: "


def _result(cfg: TrainConfig, n_train: int, steps: int):
    plan = SimpleNamespace(train=_Sized(n_train), counts={})
    progress = SimpleNamespace(
        step=steps, best_step=steps, best={}, history=[], pairs_seen=steps * 16, train_time=1.0,
        skipped_nonfinite=0, skipped_by_scaler=0, clipped_steps=0,
    )  # fmt: skip
    return train_result(cfg, plan, progress, {}, interrupted=False)


class _Sized:
    def __init__(self, n: int) -> None:
        self.n, self.report = n, ReadReport("t")

    def __len__(self) -> int:
        return self.n


def test_own_corpus_states_its_epoch_share_and_warns_below_one_percent(caplog, tmp_path: Path) -> None:
    corpus = tmp_path / "pairs.tsv"
    corpus.write_text("a house\tein Haus\n")
    own = TrainConfig(data=[str(corpus)], max_steps=120)
    with caplog.at_level(logging.WARNING, logger="babelspace.training.output.run_log"):
        small = _result(own, 1_000_000, 120)
    assert small.own_data and small.train_pairs == 1_000_000
    assert abs(small.epoch_share - 120 * 16 / 1_000_000) < 1e-12
    assert any("--epochs" in r.message and "--max-steps" in r.message for r in caplog.records)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="babelspace.training.output.run_log"):
        enough = _result(own, 10_000, 120)
        builtin = _result(TrainConfig(max_steps=120), 1_000_000, 120)  # the default mix: no warning
    assert enough.epoch_share > 0.01 and not builtin.own_data
    assert not caplog.records
