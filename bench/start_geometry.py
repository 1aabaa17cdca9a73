"""Geometry of an untrained student by depth and pooling: is the space collapsed before training?

A MEXMA student is read from its CLS state (``make_mexma_student``); e5-small was trained with mean
pooling, and its CLS state below the top layer was never trained to be a sentence vector. This bench
truncates the student to its first N layers (as ``bench/ablation.py --scale small`` does) and prints,
for mean and CLS pooling, the total variance of the L2-normalised vectors (1 - ||mean||^2: near 0
when collapsed), the anisotropy and the spectrum rank (effective rank: the spectrum's shape, blind to
collapse) on the English and the translated sides of held-out Bible test-book pairs.

    HF_HUB_OFFLINE=1 python bench/start_geometry.py --layers 12,6,4,2 --lang de --pairs 100
"""

from __future__ import annotations

import argparse
import copy
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--student", default="e5-small")
    ap.add_argument("--layers", default="12,6,4,2", help="comma-separated depths to keep")
    ap.add_argument("--lang", default="de")
    ap.add_argument("--pairs", type=int, default=100, help="first N test-book pairs (both sides encoded)")
    ap.add_argument("--max-seq-length", type=int, default=32)
    args = ap.parse_args()

    from babelspace.data.readers import load_parallel
    from babelspace.evaluation.report import format_table
    from babelspace.metrics.geometry import anisotropy, effective_rank, total_variance, variance_spectrum
    from babelspace.models.encoder import encode, load_encoder
    from babelspace.objectives.mexma import make_mexma_student

    pairs = load_parallel("bible", langs=[args.lang], split="test").pairs[: args.pairs]
    texts = [p.src for p in pairs] + [p.tgt for p in pairs]
    base = load_encoder(args.student, max_seq_length=args.max_seq_length)
    rows = []
    for layers in (int(x) for x in args.layers.split(",")):
        model = copy.deepcopy(base)
        auto = model[0].auto_model
        auto.encoder.layer = auto.encoder.layer[:layers]
        for pooling, view in (("mean", model), ("cls", make_mexma_student(model))):
            v = encode(view, texts, normalize=True)
            rows.append(
                {
                    "layers": layers,
                    "pooling": pooling,
                    "total var": f"{total_variance(v):.4f}",
                    "anisotropy": f"{anisotropy(v):.3f}",
                    "spectrum rank": f"{effective_rank(variance_spectrum(v)):.1f}",
                }
            )
    print(f"{args.student}, {len(texts)} sentences (en + {args.lang}, Bible test books), L2-normalised")
    print(format_table(rows, columns=list(rows[0])))


if __name__ == "__main__":
    main()
