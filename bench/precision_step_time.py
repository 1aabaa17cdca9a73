"""Training step time per precision on one device: the default recipe (minilm -> e5-small on the
Bible) for ``--steps`` steps in each of ``--precisions``, one run after the other in this process.

Prints pairs/s and seconds per step of each precision and its ratio to the first one (the peer:
fp32, what sentence-transformers trains in by default). Used by bench/gpu_check.sh; on this 2-core
CPU bf16 has no hardware support (expect it to be far slower there).

    python bench/precision_step_time.py --device cuda --precisions fp32,bf16 --steps 60
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from babelspace.training.config import TrainConfig
from babelspace.training.trainer import train


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--precisions", default="fp32,bf16")
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--langs", default=None, help="comma-separated (default: all 21)")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for precision in args.precisions.split(","):
            cfg = TrainConfig(
                device=args.device,
                precision=precision,
                max_steps=args.steps,
                batch_size=args.batch_size,
                eval_every=10**9,  # one dev check at the end only
                test_sentences=0,
                langs=args.langs.split(",") if args.langs else None,
                output=Path(tmp) / precision,
            )
            res = train(cfg)
            per_step = res.timings["training"] / res.steps
            rows.append((precision, res.pairs_per_second, per_step, res.peak_device_memory_mb, res.best_dev))
    base = rows[0][1]
    print(f"\n{'precision':10} {'pairs/s':>9} {'s/step':>8} {'x ' + rows[0][0]:>8} {'peak MB':>8}  dev score")
    for precision, pps, per_step, peak, dev in rows:
        peak_s = f"{peak:8.0f}" if peak else f"{'-':>8}"
        print(f"{precision:10} {pps:9.1f} {per_step:8.3f} {pps / base:8.2f} {peak_s}  {dev['dev_score']:.1f}")


if __name__ == "__main__":
    main()
