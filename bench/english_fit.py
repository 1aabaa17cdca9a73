"""English fidelity of the closed-form fit alone (no fine-tuning): the default run's projection fit
(1,500 pairs of the default mix in its batches' shares, ridge 1.0 towards the scaled Procrustes map,
centred teacher targets, teacher-radius export) with 0 or N English sentences of the mix's train
splits added to the fit (``--projection-fit-english N``), each measured on held-out text:

* English registers (fortunes, docstrings, UI strings test splits; licence sentences of installed
  packages, which no source resembles): mean cos(student en as exported, teacher en) and
  en <-> T(en) top-1 (mean of both directions);
* Bible test verses and CLDR currency names (held out), 21 languages: own xx <-> en and
  xx <-> T(en) as exported (top-1, mean of both directions and languages).

Student features and teacher vectors go through the trainer's caches, so each text is encoded once
for every N.

    HF_HUB_OFFLINE=1 python bench/english_fit.py --english 0 2000 6000 --verses 30 --mono-max 200
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def _evaluate(evals: dict, exported, t_cache) -> dict[str, str]:
    """One table row: each register's cells for the fitted projection behind ``exported``."""
    from ood import _both

    cells = {}
    for reg, data in evals.items():
        if isinstance(data, dict):
            own, tea = [], []
            for en, xx in data.values():
                s_en, s_xx, t_en = exported(en), exported(xx), t_cache.lookup(en)
                own.append(_both(s_xx, s_en))
                tea.append(_both(s_xx, t_en))
            cells[reg] = f"{np.mean(own):.1f} / {np.mean(tea):.1f}"
        else:
            s_en, t_en = exported(data), t_cache.lookup(data)
            cos = float((_unit(s_en) * _unit(t_en)).sum(1).mean())
            cells[reg] = f"{_both(s_en, t_en):.1f} / {cos:.3f}"
    return cells


def _eval_sets(langs: list[str], args: argparse.Namespace) -> dict:
    from ood import _sample, licence_sentences, registers

    regs = registers(langs, max(args.names, args.verses), args.mono_max)

    def cut(par: dict, k: int) -> dict:
        return {lang: (en[:k], xx[:k]) for lang, (en, xx) in par.items()}

    return {
        "names (CLDR currencies)": cut(regs["names"]["parallel"], args.names),
        "formal (Bible test)": cut(regs["formal"]["parallel"], args.verses),
        "UI strings": regs["UI strings"]["mono"],
        "everyday (fortunes)": regs["everyday (fortunes)"]["mono"],
        "technical (docstrings)": regs["technical"]["mono"],
        "legal (licences, held out)": _sample(licence_sentences(), args.mono_max),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--english", type=int, nargs="+", default=[0, 2000, 6000])
    ap.add_argument("--verses", type=int, default=30, help="Bible test verses per language")
    ap.add_argument("--names", type=int, default=20, help="CLDR currency names per language")
    ap.add_argument("--mono-max", type=int, default=200, help="texts per English register")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)

    from babelspace.data.bible import bible_languages
    from babelspace.models.encoder import load_encoder, make_student, projection_inputs, projection_layer
    from babelspace.models.output_map import teacher_radius
    from babelspace.models.projection_fit import fit_projection
    from babelspace.resources import cache_dir
    from babelspace.training.config import TrainConfig
    from babelspace.training.setup.corpora import load_corpora
    from babelspace.training.setup.english_fit import english_fit_texts
    from babelspace.training.setup.phases import FIT_SAMPLE_SEED, fit_sample, teacher_mean
    from babelspace.training.setup.teacher_cache import TeacherCache

    t0 = time.perf_counter()
    cfg = TrainConfig()
    langs = [lang for lang in bible_languages() if lang != "en"]
    teacher = load_encoder(cfg.teacher, max_seq_length=cfg.train_seq_length)
    student = make_student(cfg.student, teacher, projection="always", drop_normalize=True)
    student.max_seq_length = cfg.train_seq_length
    root = Path(cfg.cache_dir or cache_dir())
    t_cache = TeacherCache(teacher, cfg.teacher, root)
    f_cache = TeacherCache(projection_inputs(student), cfg.student, root, normalize=False)
    train, _ = load_corpora(cfg)
    fit = fit_sample(train, cfg)
    seed = cfg.seed + FIT_SAMPLE_SEED
    evals = _eval_sets(langs, args)
    t_fit = t_cache.lookup([p.src for p in fit])
    shift = teacher_mean(t_cache, fit)
    radius = teacher_radius(t_fit, shift)
    f_src, f_tgt = f_cache.lookup([p.src for p in fit]), f_cache.lookup([p.tgt for p in fit])
    print(f"fit pairs {len(fit)}: {time.perf_counter() - t0:.0f}s", flush=True)
    print("parallel: own xx<->en / xx<->T(en) top-1 %; English: en<->T(en) top-1 % / cos(student, teacher)")
    print("| English sentences in the fit | " + " | ".join(evals) + " |")
    print("|---" * (len(evals) + 1) + "|", flush=True)
    for n in args.english:
        texts = english_fit_texts(train, n, seed, [p.src for p in fit])
        fit_projection(
            student, f_src, f_tgt, t_fit, ridge=1.0, teacher_shift=shift, prior="procrustes",
            english_features=f_cache.lookup(texts) if texts else None,
            english_vectors=t_cache.lookup(texts) if texts else None,
        )  # fmt: skip
        dense = projection_layer(student).linear
        w, b = dense.weight.detach().numpy().T, dense.bias.detach().numpy()

        def exported(texts: list[str], w=w, b=b) -> np.ndarray:
            return shift + radius * _unit(f_cache.lookup(texts) @ w + b)

        cells = _evaluate(evals, exported, t_cache)
        print(
            f"| {len(texts)} | " + " | ".join(cells.values()) + f" |  ({time.perf_counter() - t0:.0f}s)",
            flush=True,
        )


if __name__ == "__main__":
    main()
