"""babelspace 0.1.0 reads only what it writes: no reader of formats of versions that were never
released (``.npz`` teacher shards, checkpoints without ``grad_accum``)."""

from __future__ import annotations

import hashlib

import numpy as np
from sentence_transformers import SentenceTransformer

from babelspace.training.config import TrainConfig
from babelspace.training.setup.teacher_cache import TeacherCache
from babelspace.training.state.resume_settings import config_changes

TEXTS = [f"a line {i} of the test" for i in range(6)]


def test_an_npz_file_in_the_teacher_cache_is_not_read(tiny_teacher_dir, tmp_path) -> None:
    model = SentenceTransformer(str(tiny_teacher_dir), device="cpu")
    cache = TeacherCache(model, str(tiny_teacher_dir), tmp_path)
    cache.dir.mkdir(parents=True)
    keys = np.array([hashlib.sha1(t.encode()).hexdigest() for t in TEXTS], dtype="S40")
    np.savez(cache.dir / "shard-0-0-old.npz", keys=keys, vecs=model.encode(TEXTS, convert_to_numpy=True))
    again = TeacherCache(model, str(tiny_teacher_dir), tmp_path)
    assert again.ensure(TEXTS) == len(TEXTS)


def test_a_saved_config_is_compared_as_written() -> None:
    now = TrainConfig().to_dict()
    saved = {k: v for k, v in now.items() if k != "grad_accum"}
    assert config_changes(saved, now) == [f"--grad-accum None -> {now['grad_accum']}"]
