"""Progress when stderr is not a terminal: periodic one-line log records with rate and ETA; the totals
that the mining shard encoder and the sharded kNN search report."""

from __future__ import annotations

import io
import logging
from pathlib import Path

import numpy as np

from babelspace.mining.corpus import fingerprint
from babelspace.mining.encode import EncodeOptions, encode_to_shards
from babelspace.mining.memory import ChunkPlan
from babelspace.mining.search import SearchOptions, sharded_knn
from babelspace.progress import Progress
from babelspace.vectors.shards import ArrayMatrix, ShardStore


def test_non_tty_progress_logs_lines_with_eta(monkeypatch, caplog) -> None:
    monkeypatch.setenv("BABELSPACE_PROGRESS_INTERVAL", "1")
    clock = {"t": 0.0}
    monkeypatch.setattr("babelspace.progress.time.monotonic", lambda: clock["t"])
    stream = io.StringIO()  # not a TTY
    with caplog.at_level(logging.INFO, logger="babelspace.progress"):
        bar = Progress(total=10, desc="train", unit="step", file=stream)
        for _ in range(10):
            clock["t"] += 0.3
            bar.update(1)
            bar.set_postfix(loss="0.1")
        bar.close()
    lines = [r.getMessage() for r in caplog.records]
    assert stream.getvalue() == ""  # no carriage-return bar, not even close()'s newline
    assert 2 <= len(lines) <= 6  # throttled: not one line per update
    assert lines[-1].startswith("train: 100%") and "10/10" in lines[-1]
    assert all("\r" not in line for line in lines)
    assert any("<" in line for line in lines)  # tqdm's elapsed<remaining (the ETA)


# ----------------------------------------------------------------------------- mining


class _Recorded(Progress):
    """A non-TTY Progress that remembers every instance and every increment."""

    made: list[_Recorded] = []

    def __init__(self, *args, **kwargs) -> None:
        kwargs["file"] = io.StringIO()
        self.steps: list[int] = []
        super().__init__(*args, **kwargs)
        _Recorded.made.append(self)

    def update(self, n: int = 1) -> bool | None:
        self.steps.append(n)
        return super().update(n)


class _HashModel:
    """Stands in for a SentenceTransformer: 4-d vectors from the text's length and first letter."""

    def get_sentence_embedding_dimension(self) -> int:
        return 4

    def encode(self, texts: list[str], normalize_embeddings: bool = False, **_: object) -> np.ndarray:
        x = np.array([[len(t), ord(t[0]), 1.0, 0.5] for t in texts], dtype=np.float32)
        return x / np.linalg.norm(x, axis=1, keepdims=True) if normalize_embeddings else x


def _recorder(monkeypatch) -> type[_Recorded]:
    _Recorded.made = []
    monkeypatch.setattr("babelspace.progress.Progress", _Recorded)
    monkeypatch.setattr("babelspace.mining.search.Progress", _Recorded)
    return _Recorded


def test_shard_encoding_progress_counts_sentences_and_resumes(monkeypatch, caplog, tmp_path: Path) -> None:
    rec = _recorder(monkeypatch)
    monkeypatch.setattr("babelspace.mining.encode.PROGRESS_BATCHES", 1)
    texts = [f"sentence number {i}" for i in range(30)]
    store = ShardStore(tmp_path / "src")
    opts = EncodeOptions(shard_size=8, batch_size=2, show_progress=True)
    with caplog.at_level(logging.INFO, logger="babelspace.progress"):
        encode_to_shards(texts, store, "fake", fingerprint(texts), opts, model=_HashModel(), desc="src")
    (bar,) = rec.made
    assert (bar.total, bar.n, bar.desc) == (30, 30, "src")
    assert bar.steps == [2] * 15  # advanced every batch inside a shard, not once per 8-row shard
    last = [r.getMessage() for r in caplog.records][-1]
    assert last.startswith("src: 100%") and "30/30" in last and "sent" in last

    store.shard_path(1).unlink()  # resume: only the missing shard is encoded and counted
    encode_to_shards(texts, store, "fake", fingerprint(texts), opts, model=_HashModel(), desc="src")
    assert (rec.made[-1].total, rec.made[-1].n) == (8, 8)
    encode_to_shards(texts, store, "fake", fingerprint(texts), opts, model=_HashModel(), desc="src")
    assert len(rec.made) == 2  # nothing missing: no bar at all


def test_sharded_knn_progress_counts_blocks(monkeypatch, caplog) -> None:
    rec = _recorder(monkeypatch)
    rng = np.random.default_rng(0)
    queries, database = rng.normal(size=(150, 8)), rng.normal(size=(250, 8))
    plan = ChunkPlan(db_rows=53, query_rows=29, budget_bytes=10**9, fixed_bytes=0, block_bytes=0)
    opts = SearchOptions(backend="numpy", show_progress=True)
    with caplog.at_level(logging.INFO, logger="babelspace.progress"):
        sharded_knn(ArrayMatrix(queries), ArrayMatrix(database), 4, plan, opts, desc="forward")
    (bar,) = rec.made
    assert (bar.total, bar.n) == (5 * 6, 30)  # ceil(250 / 53) database x ceil(150 / 29) query chunks
    assert [r.getMessage() for r in caplog.records][-1].startswith("forward: 100%")
    sharded_knn(ArrayMatrix(queries), ArrayMatrix(database), 4, plan, SearchOptions(backend="numpy"))
    assert len(rec.made) == 1  # show_progress=False: silent


def test_cli_lets_progress_lines_through_at_default_verbosity(monkeypatch, capsys) -> None:
    from babelspace.cli import main

    progress_logger = logging.getLogger("babelspace.progress")
    monkeypatch.setattr(progress_logger, "level", logging.NOTSET)
    monkeypatch.setattr(logging.getLogger(), "level", logging.WARNING)
    assert main(["resources"]) == 0  # no -v: the root logger stays at WARNING
    assert logging.getLogger().level == logging.WARNING
    assert progress_logger.getEffectiveLevel() == logging.INFO


def test_eval_cache_progress_counts_texts_and_keeps_vectors(monkeypatch, caplog) -> None:
    from babelspace.evaluation.cache import EmbeddingCache

    rec = _recorder(monkeypatch)
    monkeypatch.setattr("babelspace.evaluation.cache.PROGRESS_BATCHES", 2)
    texts = [f"{chr(97 + i % 26)} text {'x' * (i % 17)} {i}" for i in range(300)]
    plain = EmbeddingCache(_HashModel(), "m", batch_size=16).encode(texts)
    with caplog.at_level(logging.INFO, logger="babelspace.progress"):
        shown = EmbeddingCache(_HashModel(), "m", batch_size=16, progress=True).encode(texts)
    np.testing.assert_array_equal(shown, plain)  # pieces put back in input order
    (bar,) = rec.made
    assert (bar.total, bar.n) == (300, 300) and bar.steps == [32] * 9 + [12]
    assert [r.getMessage() for r in caplog.records][-1].startswith("encode m: 100%")
    EmbeddingCache(_HashModel(), "m", batch_size=16, progress=True).encode(texts[:100])
    assert len(rec.made) == 1  # under PROGRESS_MIN_TEXTS: no progress
