"""Training and encoding throughput on one device, babelspace against its sentence-transformers peer.

    python bench/gpu_bench.py --data pairs.tsv --texts encode.txt --device cuda --json out.json
    python bench/gpu_bench.py --dry ...      # the same logic, tiny sizes, on the CPU

In one run:

1. **peak**: a bf16 matrix product (8192³, mean of 10 after 3 warm-ups) on the device: the
   denominator of the MFU below (fp32 256³ in the dry mode);
2. **babelspace**, the default recipe (`babelspace train`'s defaults: distillation minilm ->
   e5-small) at each ``--batch-sizes`` for ``--steps`` steps: pairs/s (training steps only, dev
   evaluation excluded), MFU and peak device memory. MFU = pairs/s x model FLOPs per pair / peak,
   model FLOPs per pair = 6 x (student parameters outside the embeddings) x (tokens of the pair's
   two sentences, truncated at ``--max-seq-length``, mean over the data); attention-score FLOPs and
   the frozen embedding lookups are not counted;
3. **the peer**: sentence-transformers' own multilingual distillation (``SentenceTransformerTrainer``
   + ``MSELoss``, teacher vectors as labels of both columns, as in ``make_multilingual.py``), the
   same models, data, precision and steps, at each ``--peer-batch-sizes``; its best is reported;
4. **encoding**: e5-small over ``--texts`` with ``babelspace encode`` (the CLI, timed on two input
   sizes: the difference removes start-up and model loading) and ``SentenceTransformer.encode``
   in-process (after a warm-up), batch 256.

Every figure is printed as a table and written to ``--json``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from babelspace.models.encoder import load_encoder
from babelspace.training.config import TrainConfig
from babelspace.training.trainer import train

logger = logging.getLogger("gpu_bench")


def _sync(device: torch.device) -> None:
    module = getattr(torch, device.type, None)
    if module is not None and hasattr(module, "synchronize"):
        module.synchronize()


def _reset_peak(device: torch.device) -> None:
    module = getattr(torch, device.type, None)
    if module is not None and hasattr(module, "reset_peak_memory_stats"):
        module.reset_peak_memory_stats(device)


def _peak_mb(device: torch.device) -> float | None:
    module = getattr(torch, device.type, None)
    if module is None or not hasattr(module, "max_memory_allocated"):
        return None
    return module.max_memory_allocated(device) / 2**20


def matmul_peak(device: torch.device, n: int, dtype: torch.dtype, reps: int = 10) -> float:
    """Measured TFLOP/s of an n x n x n product in ``dtype``."""
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    for _ in range(3):
        a @ b
    _sync(device)
    t0 = time.perf_counter()
    for _ in range(reps):
        a @ b
    _sync(device)
    return 2 * n**3 * reps / (time.perf_counter() - t0) / 1e12


def read_pairs(path: Path, limit: int | None = None) -> list[tuple[str, str]]:
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        cols = line.split("\t")
        if len(cols) >= 2:
            rows.append((cols[0], cols[1]))
        if limit and len(rows) >= limit:
            break
    return rows


def flops_per_pair(student: str, pairs: list[tuple[str, str]], max_len: int) -> tuple[float, float, int]:
    """(model FLOPs per training pair, mean tokens per pair, non-embedding parameters)."""
    model = load_encoder(student, device="cpu", max_seq_length=max_len)
    auto = model[0].auto_model
    emb = {id(p) for p in auto.embeddings.parameters()} if hasattr(auto, "embeddings") else set()
    n_body = sum(p.numel() for p in auto.parameters() if id(p) not in emb)
    sample = pairs[:2000]
    tok = model.tokenizer
    lengths = [
        min(len(tok(s)["input_ids"]), max_len) + min(len(tok(t)["input_ids"]), max_len) for s, t in sample
    ]
    tokens = float(np.mean(lengths))
    return 6.0 * n_body * tokens, tokens, n_body


def bench_babelspace(args, batch: int, work: Path) -> dict:
    """The default recipe at ``batch`` for ``args.steps`` steps."""
    cfg = TrainConfig(
        data=[str(args.data)],
        teacher=args.teacher,
        student=args.student,
        batch_size=batch,
        max_steps=args.steps,
        eval_every=args.steps,
        log_every=args.steps,
        dev_pairs=args.dev_pairs,
        test_sentences=0,
        device=args.device,
        precision=args.precision,
        max_seq_length=args.max_seq_length,
        projection_fit_pairs=args.fit_pairs,
        output=work / f"babelspace-{batch}",
        overwrite=True,
        cache_dir=work / "cache",
    )
    try:
        res = train(cfg)
    except torch.OutOfMemoryError as exc:
        return {"batch": batch, "error": f"out of memory: {str(exc)[:120]}"}
    return {
        "batch": batch,
        "pairs_per_s": res.pairs_per_second,
        "peak_mb": res.peak_device_memory_mb,
        "train_s": res.timings.get("training"),
    }


def _peer_dataset(args, pairs: list[tuple[str, str]]):
    from datasets import Dataset

    teacher = load_encoder(args.teacher, device=args.device, max_seq_length=args.max_seq_length)
    english = [s for s, _ in pairs]
    labels = teacher.encode(english, batch_size=256, convert_to_numpy=True, show_progress_bar=False)
    del teacher
    return Dataset.from_dict(
        {"english": english, "non_english": [t for _, t in pairs], "label": labels.tolist()}
    )


def bench_peer(args, dataset, batch: int, work: Path) -> dict:
    """sentence-transformers' trainer with MSELoss at ``batch`` for ``args.steps`` steps."""
    from sentence_transformers import SentenceTransformerTrainer, SentenceTransformerTrainingArguments
    from sentence_transformers.sentence_transformer.losses import MSELoss

    device = torch.device(args.device)
    student = load_encoder(args.student, device=args.device, max_seq_length=args.max_seq_length)
    train_args = SentenceTransformerTrainingArguments(
        output_dir=str(work / f"peer-{batch}"),
        per_device_train_batch_size=batch,
        max_steps=args.steps,
        learning_rate=1e-4,
        warmup_ratio=0.1,
        bf16=args.precision == "bf16",
        save_strategy="no",
        logging_steps=args.steps,
        report_to="none",
        dataloader_drop_last=True,
        use_cpu=device.type == "cpu",
        disable_tqdm=True,
    )
    _reset_peak(device)
    trainer = SentenceTransformerTrainer(
        model=student, args=train_args, train_dataset=dataset, loss=MSELoss(student)
    )
    try:
        out = trainer.train()
    except torch.OutOfMemoryError as exc:
        return {"batch": batch, "error": f"out of memory: {str(exc)[:120]}"}
    return {
        "batch": batch,
        "pairs_per_s": out.metrics["train_samples_per_second"],
        "peak_mb": _peak_mb(device),
        "train_s": out.metrics["train_runtime"],
    }


def _cli_seconds(args, texts: list[str], work: Path) -> float:
    src = work / f"encode-{len(texts)}.txt"
    src.write_text("\n".join(texts) + "\n", encoding="utf-8")
    cmd = [sys.executable, "-m", "babelspace", "encode", args.student, str(src)]
    cmd += ["--out", str(work / "vectors.npy"), "--batch-size", "256", "--device", args.device]
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    return time.perf_counter() - t0


def bench_encode(args, work: Path) -> dict:
    texts = [t for t in args.texts.read_text(encoding="utf-8").splitlines() if t.strip()][: args.encode_n]
    small = texts[: max(1, len(texts) // 10)]
    t_big, t_small = _cli_seconds(args, texts, work), _cli_seconds(args, small, work)
    device = torch.device(args.device)
    model = load_encoder(args.student, device=args.device, max_seq_length=args.max_seq_length)
    model.encode(texts[:256], batch_size=256, show_progress_bar=False)
    _sync(device)
    t0 = time.perf_counter()
    model.encode(texts, batch_size=256, show_progress_bar=False)
    _sync(device)
    peer = time.perf_counter() - t0
    return {
        "sentences": len(texts),
        "babelspace_cli_s": t_big,
        "babelspace_sentences_per_s": (len(texts) - len(small)) / max(t_big - t_small, 1e-9),
        "peer_sentences_per_s": len(texts) / peer,
    }


def _table(report: dict) -> str:
    lines = [f"peak {report['peak_dtype']} matmul: {report['peak_tflops']:.1f} TFLOP/s"]
    lines.append(
        f"model FLOPs per pair {report['flops_per_pair']:.3g} ({report['tokens_per_pair']:.1f} tokens, "
        f"{report['body_params'] / 1e6:.1f}M non-embedding parameters)"
    )
    lines.append("| trainer | batch | pairs/s | MFU % | peak memory MB |")
    lines.append("|---|---|---|---|---|")
    for name in ("babelspace", "peer"):
        for row in report[name]:
            if "error" in row:
                lines.append(f"| {name} | {row['batch']} | {row['error']} | | |")
                continue
            mfu = 100 * row["pairs_per_s"] * report["flops_per_pair"] / (report["peak_tflops"] * 1e12)
            peak = f"{row['peak_mb']:.0f}" if row.get("peak_mb") else "-"
            lines.append(f"| {name} | {row['batch']} | {row['pairs_per_s']:.1f} | {mfu:.2f} | {peak} |")
    enc = report["encode"]
    lines.append(
        f"encode {enc['sentences']} sentences: babelspace encode {enc['babelspace_sentences_per_s']:.0f}/s "
        f"(CLI {enc['babelspace_cli_s']:.1f} s with start-up), SentenceTransformer.encode "
        f"{enc['peer_sentences_per_s']:.0f}/s"
    )
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", type=Path, required=True, help="4-column TSV: src, tgt, src_lang, tgt_lang")
    p.add_argument("--texts", type=Path, required=True, help="one sentence per line, for encoding")
    p.add_argument("--teacher", default="minilm")
    p.add_argument("--student", default="e5-small")
    p.add_argument("--device", default="cuda")
    p.add_argument("--precision", default="bf16", choices=["bf16", "fp32"])
    p.add_argument("--batch-sizes", default="16,256,1024")
    p.add_argument("--peer-batch-sizes", default="16,256,1024")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--dev-pairs", type=int, default=200)
    p.add_argument("--max-seq-length", type=int, default=128)
    p.add_argument("--encode-n", type=int, default=20000)
    p.add_argument("--fit-pairs", type=int, default=1500, help="babelspace's closed-form fit sample")
    p.add_argument("--work", type=Path, default=None, help="models' outputs and caches (default: a temp dir)")
    p.add_argument("--json", type=Path, default=None)
    p.add_argument("--dry", action="store_true", help="tiny sizes on the CPU: checks the script's logic")
    args = p.parse_args(argv)
    if args.dry:
        args.device, args.precision, args.steps = "cpu", "fp32", 2
        args.batch_sizes, args.peer_batch_sizes, args.encode_n, args.dev_pairs = "4,8", "4", 40, 20
    return args


def main(argv: list[str] | None = None) -> dict:
    logging.basicConfig(level=logging.WARNING)
    args = parse_args(argv)
    work = args.work or Path(tempfile.mkdtemp(prefix="gpu_bench_"))
    work.mkdir(parents=True, exist_ok=True)
    device = torch.device(args.device)
    dtype = torch.float32 if args.dry else torch.bfloat16
    report: dict = {"device": str(device), "precision": args.precision, "steps": args.steps}
    report["peak_dtype"] = str(dtype).replace("torch.", "")
    report["peak_tflops"] = matmul_peak(device, 256 if args.dry else 8192, dtype)
    pairs = read_pairs(args.data)
    f, tokens, n_body = flops_per_pair(args.student, pairs, args.max_seq_length)
    report.update(flops_per_pair=f, tokens_per_pair=tokens, body_params=n_body)
    report["babelspace"] = [bench_babelspace(args, int(b), work) for b in args.batch_sizes.split(",")]
    peer_max = max(int(b) for b in args.peer_batch_sizes.split(","))
    dataset = _peer_dataset(args, pairs[: args.steps * peer_max])  # what its steps consume
    report["peer"] = [bench_peer(args, dataset, int(b), work) for b in args.peer_batch_sizes.split(",")]
    report["encode"] = bench_encode(args, work)
    print(_table(report))
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
    return report


if __name__ == "__main__":
    main()
