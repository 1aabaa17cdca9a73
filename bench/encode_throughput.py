"""Encoding speed and its quality cost per inference backend (torch / ONNX Runtime / OpenVINO, fp32 / int8).

The texts: ``--verses`` Bible test-book verses in English and each of the 21 other languages (default
227 x 22 = 4,994 sentences, the same verses in every language), shuffled together so batches mix
languages and lengths as real inputs do. Each model/backend encodes all of them once after a short
warm-up; sentences/s is that count over the wall time. The same vectors give the xx->en top-1
retrieval accuracy (cosine, 21 languages, mean), so speed and accuracy come from one encoding.
torch fp32 is the peer (sentence-transformers' default) and every ratio is relative to it, measured
in the same process. Exports are made before timing (once per model, cached: babelspace.backends).

    flock /tmp/babelspace-cpu.lock python bench/encode_throughput.py --threads 2 \\
        --models e5-small,output/babelspace-student
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from pathlib import Path

import numpy as np

ALL_CONFIGS = ("torch:none", "onnx:none", "onnx:int8", "openvino:none", "openvino:int8")


def bench_texts(verses: int, seed: int) -> tuple[list[str], np.ndarray, list[str]]:
    """Shuffled texts, each text's verse index, and each text's language."""
    from babelspace.training.summary import held_out_texts

    en, per_lang = held_out_texts(None, verses, seed)
    texts, verse, lang = [], [], []
    for code, items in (("en", en), *per_lang.items()):
        texts += items
        verse += range(len(items))
        lang += [code] * len(items)
    order = np.random.default_rng(seed).permutation(len(texts))
    return [texts[i] for i in order], np.asarray(verse)[order], [lang[i] for i in order]


def xx_en_accuracy(vecs: np.ndarray, verse: np.ndarray, lang: list[str]) -> float:
    """Mean over languages of top-1 xx->en retrieval accuracy (%) against the English pool."""
    from babelspace.evaluation.tatoeba import top1_accuracy

    codes = np.asarray(lang)
    en_idx = np.flatnonzero(codes == "en")
    en_vecs = vecs[en_idx[np.argsort(verse[en_idx])]]
    accs = []
    for code in sorted(set(lang) - {"en"}):
        idx = np.flatnonzero(codes == code)
        idx = idx[np.argsort(verse[idx])]
        accs.append(top1_accuracy(vecs[idx], en_vecs))
    return float(np.mean(accs))


def run_one(model_spec: str, config: str, texts: list[str], batch_size: int) -> tuple[float, np.ndarray]:
    from babelspace.backends import load_backend_encoder
    from babelspace.encoder import encode

    backend, quantize = config.split(":")
    model = load_backend_encoder(model_spec, backend, quantize, max_seq_length=128)
    encode(model, texts[:batch_size], batch_size=batch_size, show_progress=False)  # warm-up
    t0 = time.perf_counter()
    vecs = encode(model, texts, batch_size=batch_size, show_progress=False)
    return len(texts) / (time.perf_counter() - t0), vecs


def available(config: str) -> bool:
    import importlib.util

    module = {"torch": "torch", "onnx": "optimum.onnxruntime", "openvino": "optimum.intel"}[
        config.split(":")[0]
    ]
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="e5-small", help="comma-separated model names or folders")
    ap.add_argument("--configs", default=",".join(ALL_CONFIGS), help="backend:quantize list")
    ap.add_argument("--verses", type=int, default=227, help="verses per language (x22 texts)")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2, help="torch threads (ONNX/OpenVINO use all cores)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", type=Path, default=None, help="append one JSON line per row")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    import torch

    from babelspace.logging_setup import quiet_third_party

    quiet_third_party()
    torch.set_num_threads(args.threads)
    texts, verse, lang = bench_texts(args.verses, args.seed)
    print(f"{len(texts)} texts ({args.verses} verses x {len(set(lang))} languages), batch {args.batch_size}")
    print(
        "| model | backend | sentences/s | x torch fp32 | xx->en acc % | delta pts | cos to torch (mean/min) |"
    )
    print("|---|---|---:|---:|---:|---:|---:|")
    for spec in args.models.split(","):
        ref: tuple[float, float, np.ndarray] | None = None
        for config in ["torch:none", *[c for c in args.configs.split(",") if c != "torch:none"]]:
            if not available(config):
                print(f"| {spec} | {config} | not installed | | | | |")
                continue
            from babelspace.backends import load_backend_encoder

            load_backend_encoder(spec, *config.split(":"))  # export (once) before timing
            speed, vecs = run_one(spec, config, texts, args.batch_size)
            acc = xx_en_accuracy(vecs, verse, lang)
            ref = ref or (speed, acc, vecs)
            cos = np.sum(vecs * ref[2], axis=1)  # both L2-normalised
            row = {"model": spec, "config": config, "sent_per_s": speed, "ratio": speed / ref[0]}
            row |= {
                "acc": acc,
                "delta": acc - ref[1],
                "cos_mean": float(cos.mean()),
                "cos_min": float(cos.min()),
            }
            row |= {"threads": args.threads, "texts": len(texts)}
            print(
                f"| {spec} | {config} | {speed:.1f} | {row['ratio']:.2f} | {acc:.2f} | {row['delta']:+.2f} "
                f"| {cos.mean():.4f} / {cos.min():.4f} |",
                flush=True,
            )
            if args.json:
                with open(args.json, "a") as fh:
                    fh.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
