"""Out-of-domain benchmark per register, on held-out text that training never sees.

Registers (held-out splits of `babelspace.data.sources` and the Bible's test books):

* names        CLDR currency names (held-out category), English <-> 21 languages
* phrases      CLDR unit names and amounts ("5 kilometers per hour"; held-out category)
* UI strings   standard-library error messages / help strings (English only)
* everyday     fortunes, and WordNet usage examples when WordNet is installed (English only)
* definitions  WordNet definitions (English only; needs Debian wordnet-base)
* technical    standard-library docstrings (English only)
* formal       Bible test books (Ruth, Jonah, Mark, Philippians, James), 21 languages
* legal        sentences of the licence files that installed packages ship in their ``.dist-info``
               folders (English only; no training source reads them or resembles them)

For parallel registers: own space = top-1 accuracy xx<->en with both sides encoded by the model
(mean of both directions, mean over languages); teacher space = the model's xx vectors <-> the
teacher's English vectors (mean of both directions), twice: as exported (the vectors the model
outputs, the way a user queries an index of the teacher's vectors) and centred (the teacher mean
that ``babelspace train`` added back at export, ``babelspace_teacher_mean.npy`` beside the model,
taken out of the model's vectors again). English-only registers have no own-space figure: teacher
space is the model's English vectors <-> the teacher's English vectors. ``cos`` is the mean cosine
between the model's and the teacher's vectors of the same English text (the drop-in check).

``--refit MODEL`` adds closed-form refits of MODEL's projection (no fine-tuning; for an undistilled
model such as ``e5-small`` the projection the trainer adds, i.e. the default run's starting point; the distillation
loss solved for the Dense layer as in the trainer, ridge towards the scaled Procrustes map, centred
teacher targets with the mean added back): on Bible pairs only, and on the same Bible pairs plus
English-only rows from the *train* splits of the English sources (the paper's first term).

    HF_HUB_OFFLINE=1 python bench/ood.py --models e5-small output/babelspace-student
    HF_HUB_OFFLINE=1 python bench/ood.py --models output/babelspace-student --refit output/babelspace-student
"""

from __future__ import annotations

import argparse
import copy
import logging
import random
import re
import sysconfig
import time
from pathlib import Path

import numpy as np

PARALLEL = ("names", "phrases", "formal")
MONO_SOURCES = ("mono-en:fortunes", "mono-en:pydoc", "mono-en:pymsg", "mono-en:wordnet")


def _sample(items: list, k: int, seed: int = 0) -> list:
    return items if len(items) <= k else random.Random(seed).sample(items, k)


def registers(langs: list[str], per_lang: int, mono_max: int) -> dict[str, dict]:
    """register -> {"parallel": {lang: (en, xx)}} or {"mono": [en]} from held-out splits."""
    from babelspace.data.bible import bible_parallel_texts
    from babelspace.data.sources import load_source
    from babelspace.errors import ResourceError

    out: dict[str, dict] = {}
    cldr = load_source("cldr", langs=langs, split="test").pairs
    for reg, cat in (("names", "currencies"), ("phrases", "units")):
        par = {}
        for lang in langs:
            pairs = _sample(
                [p for p in cldr if p.tgt_lang == lang and p.origin.split(":")[1] == cat], per_lang
            )
            par[lang] = ([p.src for p in pairs], [p.tgt for p in pairs])
        out[reg] = {"parallel": par}
    en, per = bible_parallel_texts(langs, "test")
    idx = sorted(_sample(list(range(len(en))), per_lang))
    out["formal"] = {
        "parallel": {lang: ([en[i] for i in idx], [per[lang][i] for i in idx]) for lang in langs}
    }

    def mono(name: str, keep=lambda p: True) -> list[str]:
        return _sample([p.src for p in load_source(name, split="test").pairs if keep(p)], mono_max)

    out["UI strings"] = {"mono": mono("mono-en:pymsg")}
    out["everyday (fortunes)"] = {"mono": mono("mono-en:fortunes")}
    out["technical"] = {"mono": mono("mono-en:pydoc")}
    out["legal (package licences)"] = {"mono": _sample(licence_sentences(), mono_max)}
    try:
        out["everyday (WordNet examples)"] = {"mono": mono("mono-en:wordnet", lambda p: ":ex" in p.origin)}
        out["definitions"] = {"mono": mono("mono-en:wordnet", lambda p: p.origin.endswith(":def"))}
    except ResourceError as exc:
        logging.warning("WordNet registers skipped: %s", exc)
    return out


_SENTENCE_END = re.compile(r"(?<=[.!?;:])\s+(?=[A-Z(\"])")


def licence_sentences() -> list[str]:
    """Distinct sentences (5-60 words, mostly letters) of the licence files in the ``.dist-info``
    folders of the running Python's installed packages, in path order."""
    roots = {Path(sysconfig.get_paths()[k]) for k in ("purelib", "platlib")}
    files = sorted(
        {
            f
            for root in roots
            for pattern in ("*.dist-info/licenses/**/*", "*.dist-info/LICENSE*")
            for f in root.glob(pattern)
            if f.is_file()
        }
    )
    seen: dict[str, None] = {}
    for path in files:
        for para in re.split(r"\n\s*\n", path.read_text(encoding="utf-8", errors="replace")):
            for sentence in _SENTENCE_END.split(" ".join(para.split())):
                letters = sum(len(w) for w in re.findall(r"[A-Za-z]+", sentence))
                if 5 <= len(sentence.split()) <= 60 and letters >= 0.7 * len(sentence.replace(" ", "")):
                    seen.setdefault(sentence, None)
    return list(seen)


class Encoder:
    """Encodes each distinct text once per model, as the model outputs it (raw, not normalised).
    ``shift``: the teacher mean the model's export added back (None for a model without one)."""

    def __init__(self, model, shift: np.ndarray | None = None) -> None:
        self.model, self.cache, self.shift = model, {}, shift

    def __call__(self, texts: list[str]) -> np.ndarray:
        from babelspace.models.encoder import encode

        new = sorted({t for t in texts if t not in self.cache})
        if new:
            vecs = encode(self.model, new, normalize=False, show_progress=False)
            self.cache.update(zip(new, vecs, strict=True))
        return np.stack([self.cache[t] for t in texts])

    def centred(self, texts: list[str]) -> np.ndarray:
        """The same vectors with the added-back mean taken out again."""
        return self(texts) if self.shift is None else self(texts) - self.shift


def _both(a: np.ndarray, b: np.ndarray) -> float:
    from babelspace.metrics.tatoeba import top1_accuracy

    return (top1_accuracy(a, b) + top1_accuracy(b, a)) / 2


SPACES = ("own", "teacher", "centred", "cos")


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    """Mean cosine between row i of ``a`` and row i of ``b``."""
    a = a / np.linalg.norm(a, axis=1, keepdims=True)
    b = b / np.linalg.norm(b, axis=1, keepdims=True)
    return float((a * b).sum(1).mean())


def evaluate(enc: Encoder, teacher: Encoder, regs: dict[str, dict]) -> dict[str, dict[str, float]]:
    """register -> {own: own-space %, teacher: teacher space as exported %, centred: teacher space
    with the export's mean taken out %, cos: mean cosine student vs teacher of the same English
    text}. Own is NaN for English-only registers; teacher-space figures are NaN for a model of
    another width than the teacher."""
    out = {}
    for reg, data in regs.items():
        pairs = data["parallel"].values() if "parallel" in data else [(data["mono"], None)]
        res: dict[str, list[float]] = {k: [] for k in SPACES}
        for en, xx in pairs:
            t_en, m_en = teacher(en), enc(en)
            same_width = m_en.shape[1] == t_en.shape[1]
            res["cos"].append(_cosine(m_en, t_en) if same_width else float("nan"))
            if xx is None:  # English only: the model's English <-> the teacher's English
                res["own"].append(float("nan"))
                q, q_c = m_en, enc.centred(en)
            else:
                res["own"].append(_both(enc(xx), m_en))
                q, q_c = enc(xx), enc.centred(xx)
            res["teacher"].append(_both(q, t_en) if same_width else float("nan"))
            res["centred"].append(_both(q_c, t_en) if same_width else float("nan"))
        out[reg] = {k: float(np.mean(v)) for k, v in res.items()}
    return out


def refit(model, teacher: TeacherEncoder, bible: list, mono: list[str]):
    """A copy of ``model`` with its projection refitted in closed form on the Bible pairs ``bible``
    (both terms of the distillation loss) plus English-only rows ``mono`` (first term only)."""
    import torch

    from babelspace.models.encoder import encode, make_student, pooled_encoder, projection_layer
    from babelspace.models.projection_fit import fit_projection

    if projection_layer(model) is None:  # an undistilled model: add the projection the trainer adds
        model = make_student(model, teacher.model, projection="always", drop_normalize=True)
    model = copy.deepcopy(model)
    src = [p.src for p in bible] + mono
    tgt = [p.tgt for p in bible] + mono
    pooled = pooled_encoder(model)
    f_src = encode(pooled, src, normalize=False, show_progress=False)
    f_tgt = encode(pooled, tgt, normalize=False, show_progress=False)
    teacher.prepare_raw(src)
    t_vec = np.stack([teacher.raw(s) for s in src])
    shift = t_vec.mean(0)
    fit_projection(model, f_src, f_tgt, t_vec, ridge=1.0, teacher_shift=shift, prior="procrustes")
    with torch.no_grad():
        bias = projection_layer(model).linear.bias
        bias.add_(torch.as_tensor(shift, dtype=bias.dtype, device=bias.device))
    return model, shift


class TeacherEncoder(Encoder):
    """The teacher, normalised for retrieval and raw for regression targets."""

    def __init__(self, model) -> None:
        super().__init__(model)
        self.raw_cache: dict[str, np.ndarray] = {}

    def raw(self, text: str) -> np.ndarray:
        return self.raw_cache[text]

    def prepare_raw(self, texts: list[str]) -> None:
        from babelspace.models.encoder import encode

        new = sorted({t for t in texts if t not in self.raw_cache})
        if new:
            self.raw_cache.update(
                zip(new, encode(self.model, new, normalize=False, show_progress=False), strict=True)
            )


def _print_table(results: dict[str, dict[str, dict[str, float]]]) -> None:
    """One table per model: a row per register; own space, teacher space as exported, teacher space
    centred (top-1 %, mean of both directions) and the student-teacher cosine on English."""

    def cell(v: float, fmt: str) -> str:
        return "—" if np.isnan(v) else format(v, fmt)

    for name, res in results.items():
        print(f"\n{name}\n")
        print("| register | own | teacher (as exported) | teacher (centred) | cos(student en, teacher en) |")
        print("|---|---|---|---|---|")
        for reg, r in res.items():
            cells = [cell(r[k], ".1f") for k in SPACES[:3]] + [cell(r["cos"], ".3f")]
            print(f"| {reg} | " + " | ".join(cells) + " |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", nargs="*", default=["e5-small", "output/babelspace-student"])
    ap.add_argument("--teacher", default="minilm")
    ap.add_argument(
        "--refit", default=None, help="a distilled model whose projection to refit in closed form"
    )
    ap.add_argument("--refit-bible-pairs", type=int, default=1500)
    ap.add_argument("--refit-mono-rows", type=int, default=6000)
    ap.add_argument("--per-lang", type=int, default=150, help="pairs per language per parallel register")
    ap.add_argument("--mono-max", type=int, default=500, help="texts per English-only register")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)

    from babelspace.data.bible import bible_languages
    from babelspace.models.encoder import load_encoder

    langs = [lang for lang in bible_languages() if lang != "en"]
    regs = registers(langs, args.per_lang, args.mono_max)
    for reg, data in regs.items():
        n = len(data["mono"]) if "mono" in data else sum(len(en) for en, _ in data["parallel"].values())
        print(f"{reg}: {n} {'texts' if 'mono' in data else 'pairs over 21 languages'}")
    teacher = TeacherEncoder(load_encoder(args.teacher))
    results = {}
    for spec in args.models:
        t0 = time.perf_counter()
        results[spec] = evaluate(Encoder(load_encoder(spec), _export_shift(spec)), teacher, regs)
        print(f"{spec}: {time.perf_counter() - t0:.0f}s", flush=True)
    if args.refit:
        from babelspace.data.readers import load_parallel, subsample

        base = load_encoder(args.refit)
        bible = load_parallel("bible", langs=langs, split="train")
        fit = subsample(bible, args.refit_bible_pairs, seed=1).pairs
        mono = _mono_fit_texts(args.refit_mono_rows)
        for label, rows in (("Bible pairs", []), (f"Bible + {len(mono)} English rows", mono)):
            t0 = time.perf_counter()
            model, shift = refit(base, teacher, fit, rows)
            results[f"{args.refit} refit on {label}"] = evaluate(Encoder(model, shift), teacher, regs)
            print(f"refit on {label}: {time.perf_counter() - t0:.0f}s", flush=True)
    _print_table(results)


def _export_shift(spec: str) -> np.ndarray | None:
    from babelspace.training.output.export import SHIFT_FILE

    path = Path(spec) / SHIFT_FILE
    return np.load(path) if path.is_file() else None


def _mono_fit_texts(mono_rows: int, seed: int = 0) -> list[str]:
    from babelspace.data.sources import load_source
    from babelspace.errors import ResourceError

    found = []
    for name in MONO_SOURCES:
        try:
            found.append(load_source(name, split="train").pairs)
        except ResourceError:
            continue
    if not mono_rows or not found:
        return []
    return [t for pairs in found for t in _sample([p.src for p in pairs], mono_rows // len(found), seed)]


if __name__ == "__main__":
    main()
