"""One trained model in the two export spaces: a model exported in the teacher's raw space
(``--export-space teacher``) next to the same weights without the teacher's mean (``centred``).

Prints, on the held-out Bible test books: English -> teacher English top-1 and MSE to the teacher's
raw vectors (the drop-in view), and xx -> teacher en top-1 and own-space accuracy per space.

    HF_HUB_OFFLINE=1 python bench/export_space.py output/babelspace-student
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from babelspace.evaluation.held_out import held_out_texts
from babelspace.metrics.tatoeba import top1_accuracy
from babelspace.models.encoder import encode, load_encoder
from babelspace.training.output.export import SHIFT_FILE


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", type=Path, help="a model saved by babelspace train (--export-space teacher)")
    ap.add_argument("--teacher", default="minilm")
    ap.add_argument("--verses", type=int, default=200)
    ap.add_argument("--seed", type=int, default=42, help="the final table's verse sample")
    args = ap.parse_args()
    mu = np.load(args.model / SHIFT_FILE)
    en, per_lang = held_out_texts(None, args.verses, args.seed)
    teacher = encode(load_encoder(args.teacher), en, normalize=False)
    student = load_encoder(str(args.model))
    s_en = encode(student, en, normalize=False)
    xx = {lang: encode(student, texts, normalize=False) for lang, texts in per_lang.items()}
    print(f"{'space':8} {'en>T(en)':>9} {'MSE to T':>9} {'xx>T(en)':>9} {'xx>en':>7} {'en>xx':>7}")
    for space, shift in (("teacher", 0.0), ("centred", mu)):
        e = s_en - shift
        mse = float(((e - teacher) ** 2).sum(1).mean())
        to_t = np.mean([top1_accuracy(v - shift, teacher) for v in xx.values()])
        xe = np.mean([top1_accuracy(v - shift, e) for v in xx.values()])
        ex = np.mean([top1_accuracy(e, v - shift) for v in xx.values()])
        print(f"{space:8} {top1_accuracy(e, teacher):9.2f} {mse:9.4f} {to_t:9.2f} {xe:7.2f} {ex:7.2f}")


if __name__ == "__main__":
    main()
