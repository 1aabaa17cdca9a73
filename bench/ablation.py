"""Ablation grid: each objective variant trained on the same data, budget and seed, then evaluated on
the held-out Bible test books with the evaluation suite (xsim, xsim++, Tatoeba).

    HF_HUB_OFFLINE=1 python bench/ablation.py --steps 20 --batch-size 8 --langs de,fr,ru,zh \
        --max-sentences 100 --head-layers 2

Default grid (issue 4): distill, contrastive, mexma (full), mexma without token gradients, mexma
without KoLeo, mexma with monolingual unmasking; translation bottleneck (LASER-like, and SONAR-like
with auto-encoding and the pair MSE). ``--variants`` picks a subset. Prints one table
(plus pairs/second of each objective) and writes it as JSON with ``--json``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

VARIANTS: dict[str, dict] = {
    # the paper's loss alone, as measured in docs/mexma.md (babelspace's default adds a teacher-space
    # contrastive term: variant "distill+nce")
    "distill": {"objective": "distill", "teacher_contrast": 0.0},
    "distill+nce": {"objective": "distill", "teacher_contrast": 1.0},
    "contrastive": {"objective": "contrastive"},
    "mexma": {"objective": "mexma"},
    "mexma -token-grad": {"objective": "mexma", "token_gradients": False},
    "mexma -koleo": {"objective": "mexma", "koleo_weight": 0.0},
    "mexma mono-unmask": {"objective": "mexma", "unmasking": "mono"},
    # translation bottleneck (LASER; docs/objectives.md) and its SONAR-style variant
    "bottleneck": {"objective": "bottleneck"},
    "bottleneck sonar": {"objective": "bottleneck", "autoencode_weight": 1.0, "align_weight": 1.0},
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--student", default="e5-small")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--lr", type=float, default=2e-5)
    ap.add_argument("--langs", default="de,fr,ru,zh")
    ap.add_argument("--max-seq-length", type=int, default=64)
    ap.add_argument("--max-sentences", type=int, default=100)
    ap.add_argument("--head-layers", type=int, default=2)
    ap.add_argument("--head-heads", type=int, default=8)
    ap.add_argument("--variants", default=",".join(v for v in VARIANTS if v != "distill+nce"))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)

    from babelspace.evaluation.report import format_table
    from babelspace.evaluation.runner import EvalConfig, run_eval
    from babelspace.training.config import TrainConfig
    from babelspace.training.trainer import train

    langs = args.langs.split(",")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.variants.split(","):
            overrides = VARIANTS[name]
            cfg = TrainConfig(
                student=args.student,
                data=["bible"],
                langs=langs,
                batch_size=args.batch_size,
                lr=args.lr,
                max_steps=args.steps,
                eval_every=args.steps,
                warmup=max(1, args.steps // 10),
                max_seq_length=args.max_seq_length,
                dev_pairs=100,
                projection_fit_pairs=400,
                head_layers=args.head_layers,
                head_heads=args.head_heads,
                output=Path(tmp) / name.replace(" ", "_"),
                seed=args.seed,
                test_sentences=0,
                export="final",
                **overrides,
            )
            t = time.perf_counter()
            res = train(cfg)
            train_s = time.perf_counter() - t
            # the final weights are exported (export="final"), so every variant is judged after the same budget
            report = run_eval(
                EvalConfig(
                    model=str(res.output),
                    tasks=["xsim", "xsimpp", "tatoeba"],
                    langs=langs,
                    max_sentences=args.max_sentences,
                    seed=args.seed,
                    max_seq_length=args.max_seq_length,
                )
            )
            tasks = report.tasks
            rows.append(
                {
                    "variant": name,
                    "xsim err%": tasks["xsim"].average["error_rate"],
                    "xsim++ err%": tasks["xsimpp"].average["error_rate"],
                    "tatoeba acc%": tasks["tatoeba"].average["mean_accuracy"],
                    "pairs/s": res.pairs_per_second,
                    "train s": train_s,
                    "best step": res.best_step,
                }
            )
            print(json.dumps(rows[-1]), flush=True)
    print(
        f"\nstudent {args.student}, {args.steps} steps x {args.batch_size} pairs, lr {args.lr}, langs {args.langs}, "
        f"max length {args.max_seq_length}, MEXMA head {args.head_layers} layers; eval on {args.max_sentences} "
        "test-book verses per language (final weights)"
    )
    print(format_table(rows, columns=list(rows[0])))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
