"""Encoding speed and its quality cost per inference backend (torch / ONNX Runtime / OpenVINO, fp32 / int8).

The texts: ``--verses`` Bible test-book verses in English and each of the 21 other languages (default
227 x 22 = 4,994 sentences, the same verses in every language), shuffled together so batches mix
languages and lengths as real inputs do. Each model/backend encodes all of them once after a short
warm-up, in ``--chunks`` slices taken in turn by every backend (so a busy neighbour process slows all
backends alike); sentences/s is the count over each backend's summed wall time. The same vectors give the xx->en top-1
retrieval accuracy (cosine, 21 languages, mean), so speed and accuracy come from one encoding.
torch fp32 is the peer (sentence-transformers' default) and every ratio is relative to it, measured
in the same process. Exports are made before timing (once per model, cached: babelspace.models.backends),
and so is a warm-up of three batches whose time is printed (for ``compile:none``, torch fp32 with
``torch.compile``, it is the compile time).

    flock /tmp/babelspace-cpu.lock python bench/encode_throughput.py --threads 2 \\
        --models e5-small,output/babelspace-student
    flock /tmp/babelspace-cpu.lock python bench/encode_throughput.py --threads 2 \\
        --models e5-small --configs torch:none,compile:none
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from pathlib import Path

import numpy as np

ALL_CONFIGS = ("torch:none", "onnx:none", "onnx:int8", "openvino:none", "openvino:int8")
#: Also accepted by --configs: ``compile:none``, torch fp32 through ``torch.compile`` (see load_config).


def bench_texts(verses: int, seed: int) -> tuple[list[str], np.ndarray, list[str]]:
    """Shuffled texts, each text's verse index, and each text's language."""
    from babelspace.evaluation.held_out import held_out_texts

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
    from babelspace.metrics.tatoeba import top1_accuracy

    codes = np.asarray(lang)
    en_idx = np.flatnonzero(codes == "en")
    en_vecs = vecs[en_idx[np.argsort(verse[en_idx])]]
    accs = []
    for code in sorted(set(lang) - {"en"}):
        idx = np.flatnonzero(codes == code)
        idx = idx[np.argsort(verse[idx])]
        accs.append(top1_accuracy(vecs[idx], en_vecs))
    return float(np.mean(accs))


def load_config(spec: str, config: str) -> object:
    """The model of one ``backend:quantize`` config. ``compile:none`` is the torch fp32 model with its
    transformer compiled by ``torch.compile`` (inductor, ``dynamic=True``: batches are padded to their
    longest text, so sequence length and the last batch's size vary)."""
    from babelspace.models.backends import load_backend_encoder

    backend, quantize = config.split(":")
    if backend != "compile":
        return load_backend_encoder(spec, backend, quantize, max_seq_length=128)
    import torch

    model = load_backend_encoder(spec, "torch", quantize, max_seq_length=128)
    inner = model[0].auto_model
    # sentence-transformers calls ``auto_model.forward`` itself (not the module), so compile that
    inner.forward = torch.compile(inner.forward, dynamic=True)
    return model


def compiled_graphs() -> int:
    """Graphs torch.compile has produced in this process (0: a compiled config ran eagerly)."""
    from torch._dynamo.utils import counters

    return int(counters["stats"]["unique_graphs"])


def warm_up_batches(texts: list[str], batch_size: int) -> list[list[str]]:
    """Two full batches and one odd-sized one: every config (and a compiled graph) sees the shape
    changes of the timed run before the clock starts."""
    return [
        texts[:batch_size],
        texts[batch_size : 2 * batch_size],
        texts[2 * batch_size : 2 * batch_size + 7],
    ]


def run_interleaved(
    spec: str, configs: list[str], texts: list[str], batch_size: int, chunks: int
) -> dict[str, tuple[float, np.ndarray]]:
    """Every config encodes the same ``chunks`` slices of ``texts`` in turn (config A slice 1, config B
    slice 1, ..., A slice 2, ...), so load from other processes falls on every config alike.
    Returns {config: (sentences/s over all slices, vectors in text order)}."""
    from babelspace.models.encoder import encode

    models = {}
    for config in configs:  # exports (once per model, cached) and loads happen before any timing
        models[config] = load_config(spec, config)
        t0 = time.perf_counter()
        for warm in warm_up_batches(texts, batch_size):  # a compiled model compiles here
            encode(models[config], warm, batch_size=batch_size, show_progress=False)
        print(f"{spec} {config}: warm-up {time.perf_counter() - t0:.1f} s", flush=True)
        if config.startswith("compile:") and compiled_graphs() == 0:
            raise RuntimeError(
                f"{spec}: torch.compile produced no graph; the compiled config would run eagerly"
            )
    seconds = dict.fromkeys(configs, 0.0)
    parts: dict[str, list[np.ndarray]] = {c: [] for c in configs}
    for piece in np.array_split(np.arange(len(texts)), chunks):
        batch = [texts[i] for i in piece]
        for config in configs:
            t0 = time.perf_counter()
            parts[config].append(encode(models[config], batch, batch_size=batch_size, show_progress=False))
            seconds[config] += time.perf_counter() - t0
    return {c: (len(texts) / seconds[c], np.concatenate(parts[c])) for c in configs}


def available(config: str) -> bool:
    import importlib.util

    module = {
        "torch": "torch",
        "compile": "torch",
        "onnx": "optimum.onnxruntime",
        "openvino": "optimum.intel",
    }[config.split(":")[0]]
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
    ap.add_argument("--chunks", type=int, default=10, help="interleaved slices (spreads machine load evenly)")
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
    wanted = ["torch:none", *[c for c in args.configs.split(",") if c != "torch:none"]]
    for c in wanted:
        if not available(c):
            print(f"| (all) | {c} | not installed | | | | |")
    configs = [c for c in wanted if available(c)]
    for spec in args.models.split(","):
        results = run_interleaved(spec, configs, texts, args.batch_size, args.chunks)
        ref_speed, ref_vecs = results["torch:none"]
        ref_acc = xx_en_accuracy(ref_vecs, verse, lang)
        for config, (speed, vecs) in results.items():
            acc = xx_en_accuracy(vecs, verse, lang)
            cos = np.sum(vecs * ref_vecs, axis=1)  # both L2-normalised
            row = {"model": spec, "config": config, "sent_per_s": speed, "ratio": speed / ref_speed}
            row |= {
                "acc": acc,
                "delta": acc - ref_acc,
                "cos_mean": float(cos.mean()),
                "cos_min": float(cos.min()),
            }
            row |= {"threads": args.threads, "texts": len(texts), "chunks": args.chunks}
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
