"""One trained model in its export spaces: the model as exported in the teacher's raw space
(``--export-space teacher``: output ``c + mu``, ``c`` the centred part the student was trained on,
``mu`` the teacher mean added back), the same weights without the teacher's mean (``centred``), and
with ``--gains G ...`` the raw space with the centred part scaled, ``G·c + mu`` (what a gain folded
into the export would give).

Prints, on the held-out Bible test books: English -> teacher English top-1, MSE to the teacher's raw
vectors and mean cosine with them (the drop-in view), and xx -> teacher en top-1 and own-space
accuracy per space.

    HF_HUB_OFFLINE=1 python bench/export_space.py output/babelspace-student --gains 1.25 1.5 2
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from babelspace.evaluation.held_out import held_out_texts
from babelspace.metrics.tatoeba import top1_accuracy
from babelspace.models.encoder import encode, load_encoder
from babelspace.training.output.export import SHIFT_FILE


def _row(name: str, s_en: np.ndarray, xx: dict[str, np.ndarray], teacher: np.ndarray) -> str:
    mse = float(((s_en - teacher) ** 2).sum(1).mean())
    cos = float(
        np.mean((s_en * teacher).sum(1) / np.linalg.norm(s_en, axis=1) / np.linalg.norm(teacher, axis=1))
    )
    to_t = np.mean([top1_accuracy(v, teacher) for v in xx.values()])
    xe = np.mean([top1_accuracy(v, s_en) for v in xx.values()])
    ex = np.mean([top1_accuracy(s_en, v) for v in xx.values()])
    return (
        f"{name:12} {top1_accuracy(s_en, teacher):9.2f} {mse:9.4f} {cos:7.3f} {to_t:9.2f} {xe:7.2f} {ex:7.2f}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", type=Path, help="a model saved by babelspace train (--export-space teacher)")
    ap.add_argument("--teacher", default="minilm")
    ap.add_argument("--verses", type=int, default=200)
    ap.add_argument("--seed", type=int, default=42, help="the final table's verse sample")
    ap.add_argument("--gains", type=float, nargs="*", default=[], help="scales of the centred part to add")
    ap.add_argument(
        "--radii",
        type=float,
        nargs="*",
        default=[],
        help="norms to give the centred part (each vector's centred part unit-normalised, times R, plus the mean)",
    )
    args = ap.parse_args()
    mu = np.load(args.model / SHIFT_FILE)
    en, per_lang = held_out_texts(None, args.verses, args.seed)
    teacher = encode(load_encoder(args.teacher), en, normalize=False)
    student = load_encoder(str(args.model))
    s_en = encode(student, en, normalize=False) - mu
    xx = {lang: encode(student, texts, normalize=False) - mu for lang, texts in per_lang.items()}
    print(
        f"{'space':12} {'en>T(en)':>9} {'MSE to T':>9} {'cos':>7} {'xx>T(en)':>9} {'xx>en':>7} {'en>xx':>7}"
    )
    for name, gain, shift in [("teacher", 1.0, mu), *((f"gain {g:g}", g, mu) for g in args.gains)]:
        print(_row(name, gain * s_en + shift, {k: gain * v + shift for k, v in xx.items()}, teacher))
    for r in args.radii:
        print(
            _row(
                f"radius {r:g}",
                _radial(s_en, r) + mu,
                {k: _radial(v, r) + mu for k, v in xx.items()},
                teacher,
            )
        )
    print(_row("centred", s_en, xx, teacher))
    print(f"teacher's own centred norm on these verses: {np.sqrt(((teacher - mu) ** 2).sum(1).mean()):.3f}")


def _radial(v: np.ndarray, r: float) -> np.ndarray:
    return r * v / np.linalg.norm(v, axis=1, keepdims=True)


if __name__ == "__main__":
    main()
