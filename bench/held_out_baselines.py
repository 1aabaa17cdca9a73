"""The final table's baseline columns (the teacher, the untrained student) for the default models,
written to the scores file shipped with the package (``babelspace/evaluation/held_out_baselines.json``).

They depend only on the two models (keyed by content hash), the held-out verses and the encoding
settings, so ``babelspace train`` reads them instead of encoding 2 x verses x 22 languages; a run
whose models, verses or settings differ computes its own (and caches them). Rerun after changing a
pinned default model or the default test set:

    HF_HUB_OFFLINE=1 python bench/held_out_baselines.py

Entries for other keys already in the file are kept; one with the same key is replaced.
"""

from __future__ import annotations

import argparse
import json
import platform
import tempfile
import time
from pathlib import Path

import torch

from babelspace.evaluation import held_out, held_out_baselines
from babelspace.training.config import TrainConfig


def main() -> None:
    defaults = TrainConfig()
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--teacher", default=defaults.teacher)
    ap.add_argument("--student", default=defaults.student)
    ap.add_argument("--test-sentences", type=int, default=defaults.test_sentences)
    ap.add_argument("--seed", type=int, default=defaults.seed)
    ap.add_argument("--max-seq-length", type=int, default=defaults.max_seq_length)
    ap.add_argument("--backend", default="torch")
    ap.add_argument("--quantize", default="none")
    ap.add_argument("--out", type=Path, default=held_out_baselines.SHIPPED_BASELINES)
    args = ap.parse_args()

    en, per_lang = held_out.held_out_texts(defaults.langs, args.test_sentences, args.seed)
    common = {"max_seq_length": args.max_seq_length, "backend": args.backend, "quantize": args.quantize}
    t_key, s_key, fp = held_out_baselines.scores_key(args.teacher, args.student, en, per_lang, **common)
    if t_key is None or s_key is None:
        raise SystemExit(
            "both models must be local folders (offline names or paths): scores are keyed by content"
        )
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:  # computed from the models, never from a cache
        teacher = held_out_baselines.baseline_vectors(args.teacher, en, per_lang, cache_dir=tmp, **common)
        before = held_out_baselines.baseline_vectors(args.student, en, per_lang, cache_dir=tmp, **common)
    entry = {
        "models": {"teacher": args.teacher, "student": args.student},
        "teacher": t_key,
        "student": s_key,
        "data": fp,
        "verses": len(en),
        "languages": sorted(per_lang),
        "seed": args.seed,
        "settings": common,
        "computed_with": f"torch {torch.__version__} on {platform.machine()} CPU",
        "scores": held_out.baseline_columns(teacher, before),
    }
    try:
        entries = json.loads(args.out.read_text())["entries"]
    except (OSError, ValueError, KeyError):
        entries = []
    entries = [
        e for e in entries if (e.get("teacher"), e.get("student"), e.get("data")) != (t_key, s_key, fp)
    ]
    doc = {"about": "bench/held_out_baselines.py", "entries": [*entries, entry]}
    args.out.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
    mean = {
        col: sum(r[col] for r in entry["scores"].values()) / len(per_lang)
        for col in held_out.BASELINE_COLUMNS
    }
    print(
        f"{len(en)} verses x {len(per_lang)} languages in {time.perf_counter() - t0:.0f}s; wrote {args.out}"
    )
    print("means: " + ", ".join(f"{k} {v:.2f}" for k, v in mean.items()))


if __name__ == "__main__":
    main()
