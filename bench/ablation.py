"""Ablation grid: each objective variant trained on the same data, budget and seed, then evaluated on
the held-out Bible test books with the evaluation suite (xsim, xsim++, Tatoeba).

    HF_HUB_OFFLINE=1 python bench/ablation.py --steps 20 --batch-size 8 --langs de,fr,ru,zh \
        --max-sentences 100 --head-layers 2

Default grid: distill, contrastive, mexma (full), mexma without token gradients, mexma
without KoLeo, mexma with monolingual unmasking; translation bottleneck (LASER-like, and SONAR-like
with auto-encoding and the pair MSE). ``--variants`` picks a subset; ``distill+nce`` (babelspace's
default distillation) and ``bottleneck vocab8k`` (the decoder's softmax over the 8,000 most frequent
target ids, ``--decoder-vocab 8000``) are there to be picked, and so are the untrained starting
points ``start mean`` (the student as loaded) and ``start cls`` (CLS pooling: MEXMA's starting point),
evaluated without training. Every row also reports the geometry of the space (``eval --task
geometry`` on the test verses: total variance of the normalised vectors, which sees complete
collapse (a cone); minimum per-dimension std; spectrum rank, which sees dimensional collapse;
anisotropy, derived from the total variance; hubness skew, within a language and xx->en; language
share), so "KoLeo spreads the space" is a measured claim. mexma and
contrastive rows train the word embeddings (``freeze_embeddings=False``), as official MEXMA does.

``--scale small``: a second scale where the objectives have room to act: the student is e5-small
truncated to its first ``--small-layers`` layers (default 4; same vocabulary, so the embeddings start
multilingual but the top of the network is gone), trained for ``--steps`` steps; with ``--seeds 0,1``
each variant runs once per seed (same data, steps and seed across variants) and a second table gives
the mean and the spread (max - min) over seeds.

    HF_HUB_OFFLINE=1 python bench/ablation.py --scale small --steps 300 --seeds 0,1 --langs de,fr \
        --max-sentences 100 --head-layers 1

``--data`` (default ``bible``) and ``--eval-data`` (default: the Bible's test books) take corpus
files instead, for a machine without the offline Bible (``bench/gpu_check.sh`` passes the staged
``pairs.tsv`` and ``test_pairs.tsv``); ``--train-langs`` trains on other languages than the
evaluated ``--langs`` (``all``: every language of the data).

Prints one table (plus pairs/second of each objective) and writes it as JSON with ``--json``.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

VARIANTS: dict[str, dict] = {
    # the paper's loss alone, as measured in docs/mexma.md (babelspace's default adds a teacher-space
    # contrastive term: variant "distill+nce"; its English fit and English-side cosine term stay off
    # in both, as when docs/mexma.md measured them)
    "distill": {
        "objective": "distill",
        "teacher_contrast": 0.0,
        "english_cosine": 0.0,
        "projection_fit_english": 0,
    },
    "distill+nce": {
        "objective": "distill",
        "teacher_contrast": 1.0,
        "english_cosine": 0.0,
        "projection_fit_english": 0,
    },
    "contrastive": {"objective": "contrastive"},
    "mexma": {"objective": "mexma"},
    "mexma -token-grad": {"objective": "mexma", "token_gradients": False},
    "mexma -koleo": {"objective": "mexma", "koleo_weight": 0.0},
    "mexma mono-unmask": {"objective": "mexma", "unmasking": "mono"},
    # translation bottleneck (LASER; docs/objectives.md) and its SONAR-style variant
    "bottleneck": {"objective": "bottleneck"},
    "bottleneck sonar": {"objective": "bottleneck", "autoencode_weight": 1.0, "sentence_mse_weight": 1.0},
    # the same with the decoder's softmax over the 8,000 most frequent target ids (--decoder-vocab)
    "bottleneck vocab8k": {"objective": "bottleneck", "decoder_vocab": 8000},
    # untrained references: the student as loaded, and with MEXMA's CLS pooling
    "start mean": {"objective": None},
    "start cls": {"objective": None, "cls": True},
}

#: Objectives that train the word embeddings in this bench (the new default for them).
TRAINABLE_EMBEDDINGS = {"mexma", "contrastive"}

METRICS = (
    "xsim err%",
    "xsim ±",
    "xsim++ err%",
    "xsim++ ±",
    "tatoeba acc%",
    "tatoeba ±",
    "total var",
    "dim std min",
    "dim std median",
    "spectrum rank",
    "anisotropy",
    "hubness",
    "xx-en hubness",
    "lang share",
)

#: Where each metric comes from: (task, key of the task's average).
METRIC_SOURCES = {
    "xsim err%": ("xsim", "error_rate"),
    "xsim++ err%": ("xsimpp", "error_rate"),
    "tatoeba acc%": ("tatoeba", "mean_accuracy"),
    "total var": ("geometry", "total_variance"),
    "dim std min": ("geometry", "dim_std_min"),
    "dim std median": ("geometry", "dim_std_median"),
    "spectrum rank": ("geometry", "spectrum_rank"),
    "anisotropy": ("geometry", "anisotropy"),
    "hubness": ("geometry", "hubness_skew"),
    "xx-en hubness": ("geometry", "cross_hubness_skew"),
    "lang share": ("geometry", "language_share"),
}


def truncated_student(base: str, layers: int, out: Path) -> str:
    """``base`` (a model name or folder) with only its first ``layers`` transformer layers, saved to ``out``."""
    from babelspace.models.encoder import load_encoder

    model = load_encoder(base)
    auto = model[0].auto_model
    auto.encoder.layer = auto.encoder.layer[:layers]
    auto.config.num_hidden_layers = layers
    model.save(str(out))
    return str(out)


def untrained(student: str, cls: bool, out: Path, max_seq_length: int) -> Path:
    """The starting student saved to ``out`` (with CLS pooling when ``cls``), for a reference row."""
    from babelspace.models.encoder import load_encoder
    from babelspace.objectives.mexma import make_mexma_student

    model = load_encoder(student, max_seq_length=max_seq_length)
    (make_mexma_student(model) if cls else model).save(str(out))
    return out


#: The retrieval columns whose 95% half-width (binomial sampling error of the test verses) follows them.
HALF_WIDTHS = {"xsim err%": "xsim ±", "xsim++ err%": "xsim++ ±", "tatoeba acc%": "tatoeba ±"}
Z95 = 1.959964
#: Two-sided 95% Student t quantiles by degrees of freedom (seed-paired differences).
T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262}


def binomial_half_width(percent: float, n: int) -> float:
    """95% half-width (points) of a rate in % measured on ``n`` independent queries."""
    p = percent / 100.0
    return 100.0 * Z95 * math.sqrt(max(p * (1.0 - p), 0.0) / max(n, 1))


def metrics(tasks: dict) -> dict:
    """The table's metric columns from an evaluation report's tasks (None where not run), with the
    95% half-width of each retrieval rate: xsim and xsim++ over their queries (micro-averaged), the
    Tatoeba mean over languages with each language's verses (``held_out.mean_ci``; one direction's
    count, the conservative choice for the mean of two directions)."""
    from babelspace.evaluation.held_out import mean_ci

    out: dict = {}
    for col, (task, key) in METRIC_SOURCES.items():
        out[col] = tasks[task].average.get(key) if task in tasks else None
    for col, task in (("xsim err%", "xsim"), ("xsim++ err%", "xsimpp")):
        if out.get(col) is not None and tasks[task].average.get("n"):
            out[HALF_WIDTHS[col]] = binomial_half_width(out[col], int(tasks[task].average["n"]))
    if out.get("tatoeba acc%") is not None:
        rows = [r for lang, r in tasks["tatoeba"].per_language.items() if lang != "en" and "n" in r]
        out["tatoeba ±"] = mean_ci([r["mean_accuracy"] for r in rows], [int(r["n"]) for r in rows])
    return out


def parse_variant(spec: str) -> tuple[str, dict]:
    """A grid entry: a name of :data:`VARIANTS` followed by optional ``field=value`` overrides of
    the training config (``"mexma head_warmup_steps=20 head_lr=1e-3"``); values are read as JSON
    (numbers, true/false), else kept as strings."""
    words = spec.split()
    base = " ".join(w for w in words if "=" not in w)
    if base not in VARIANTS:
        raise SystemExit(f"unknown variant {base!r} in {spec!r}; known: {', '.join(VARIANTS)}")
    overrides = dict(VARIANTS[base])
    for word in (w for w in words if "=" in w):
        key, value = word.split("=", 1)
        try:
            overrides[key] = json.loads(value)
        except json.JSONDecodeError:
            overrides[key] = value
    return base, overrides


def compare(rows: list[dict], pairs: list[tuple[str, str]]) -> list[dict]:
    """For each (A, B): per seed A - B, their mean and 95% half-width, and a verdict only where the
    interval excludes 0. Over several seeds the interval is Student's t of the seed-paired differences
    (seed variation; both rows see the same test verses); over one seed, the binomial half-widths of
    A and B combined (sampling error of the verses only)."""
    out = []
    for a, b in pairs:
        row: dict = {"A": a, "B": b}
        for col, better in (("xsim err%", -1), ("xsim++ err%", -1), ("tatoeba acc%", 1), ("total var", 1)):
            by_seed = {r["seed"]: r for r in rows if r["variant"] == b and r.get(col) is not None}
            diffs, hws = [], []
            for r in rows:
                other = by_seed.get(r["seed"])
                if r["variant"] == a and r.get(col) is not None and other is not None:
                    diffs.append(r[col] - other[col])
                    hws.append(
                        math.hypot(r.get(HALF_WIDTHS.get(col), 0.0), other.get(HALF_WIDTHS.get(col), 0.0))
                    )
            if not diffs:
                continue
            mean = sum(diffs) / len(diffs)
            if len(diffs) > 1:
                sd = math.sqrt(sum((d - mean) ** 2 for d in diffs) / (len(diffs) - 1))
                hw = T95.get(len(diffs) - 1, 1.96) * sd / math.sqrt(len(diffs))
            else:
                hw = hws[0]
            row[f"{col} A-B"] = mean
            row[f"{col} ±"] = hw
            if col != "total var":
                verdict = "A better" if better * mean > 0 else "B better"
                row[f"{col.split()[0]} verdict"] = verdict if abs(mean) > hw and hw > 0 else "not resolved"
            row["seeds"] = len(diffs)
        out.append(row)
    return out


def summarise(rows: list[dict]) -> list[dict]:
    """Mean and spread (max - min) over seeds of every metric, one row per variant."""
    out = []
    for name in dict.fromkeys(r["variant"] for r in rows):
        mine = [r for r in rows if r["variant"] == name]
        row = {"variant": name, "seeds": len(mine)}
        for key in METRICS:
            vals = [r[key] for r in mine if r.get(key) is not None]
            if vals:
                row[key] = sum(vals) / len(vals)
                if len(vals) > 1:
                    row[f"{key} spread"] = max(vals) - min(vals)
        out.append(row)
    return out


def main() -> None:  # noqa: PLR0915 - a benchmark script: one linear sequence of measurements
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--student", default="e5-small")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--lr", type=float, default=2e-5)
    ap.add_argument("--langs", default="de,fr,ru,zh", help="evaluated languages")
    ap.add_argument(
        "--train-langs", default=None, help="trained languages (default: --langs; all: every one)"
    )
    ap.add_argument("--data", default="bible", help="training corpus (a --data spec of babelspace train)")
    ap.add_argument(
        "--eval-data", default=None, help="evaluation pairs file (default: the Bible's test books)"
    )
    ap.add_argument(
        "--head-ffn", type=int, default=None, help="unmasking head FFN width (default: 4 x hidden)"
    )
    ap.add_argument("--grad-accum", type=int, default=1)
    ap.add_argument("--max-seq-length", type=int, default=64)
    ap.add_argument("--max-sentences", type=int, default=100)
    ap.add_argument("--head-layers", type=int, default=2)
    ap.add_argument("--head-heads", type=int, default=8)
    ap.add_argument(
        "--variants",
        default=",".join(v for v in VARIANTS if v not in {"distill+nce", "bottleneck vocab8k"}),
    )
    ap.add_argument(
        "--mexma-set",
        default="",
        help="field=value overrides for every MEXMA row, e.g. 'head_warmup_steps=20 head_lr=1e-3'",
    )
    ap.add_argument(
        "--compare",
        default="",
        help="'A:B,...' variant pairs: per seed A - B with a 95%% interval and a verdict where it supports one",
    )
    ap.add_argument("--dry-run", action="store_true", help="print the grid and the configs, train nothing")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--seeds", default=None, help="comma-separated seeds (overrides --seed), e.g. 0,1")
    ap.add_argument("--scale", choices=["e5-small", "small"], default="e5-small")
    ap.add_argument("--small-layers", type=int, default=4)
    ap.add_argument("--tasks", default="xsim,xsimpp,tatoeba,geometry", help="evaluation tasks")
    ap.add_argument("--json", default=None)
    ap.add_argument(
        "--previous",
        default=None,
        help="JSON rows of an earlier run of the same grid (other seeds): joined into the tables",
    )
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)

    from babelspace.evaluation.config import EvalConfig
    from babelspace.evaluation.report import format_table
    from babelspace.evaluation.runner import run_eval
    from babelspace.training.config import TrainConfig
    from babelspace.training.trainer import train

    langs = args.langs.split(",")
    train_langs = (
        langs
        if args.train_langs is None
        else None
        if args.train_langs == "all"
        else args.train_langs.split(",")
    )
    eval_data = [args.eval_data] if args.eval_data else None
    seeds = [int(x) for x in args.seeds.split(",")] if args.seeds else [args.seed]
    names = [v for v in args.variants.split(",") if v.strip()]  # none: print the --previous rows only
    grid = [(seed, name) for seed in seeds for name in names]
    rows = json.loads(Path(args.previous).read_text()) if args.previous else []
    seeds = sorted({r["seed"] for r in rows} | set(seeds))
    starts: dict[str, dict] = {
        r["variant"]: r for r in rows if VARIANTS.get(r["variant"], {}).get("objective", 1) is None
    }
    with tempfile.TemporaryDirectory() as tmp:
        student = args.student
        if args.scale == "small" and grid:
            student = truncated_student(args.student, args.small_layers, Path(tmp) / "small-student")
        for seed, name in grid:
            _, overrides = parse_variant(name)
            if "mexma" in str(overrides["objective"]) and args.mexma_set:
                # the grid-wide MEXMA settings under the row's own (e.g. "mexma -koleo" keeps its switch)
                extra = parse_variant("mexma " + args.mexma_set)[1]
                overrides = {**overrides, **{k: v for k, v in extra.items() if k not in overrides}}
            if args.dry_run:
                print(json.dumps({"variant": name, "seed": seed, **overrides}), flush=True)
                continue
            if overrides["objective"] is None and name in starts:  # deterministic: evaluated once
                rows.append({**starts[name], "seed": seed})
                print(json.dumps(rows[-1]), flush=True)
                continue
            if overrides["objective"] is None:  # an untrained reference
                model = untrained(student, overrides.get("cls", False), Path(tmp) / name, args.max_seq_length)
                report = run_eval(
                    EvalConfig(
                        model=str(model),
                        tasks=args.tasks.split(","),
                        langs=langs,
                        data=eval_data,
                        max_sentences=args.max_sentences,
                        seed=0,
                        max_seq_length=args.max_seq_length,
                    )
                )
                rows.append({"variant": name, "seed": seed, **metrics(report.tasks)})
                starts[name] = rows[-1]
                print(json.dumps(rows[-1]), flush=True)
                continue
            if overrides["objective"] in TRAINABLE_EMBEDDINGS:
                overrides.setdefault("freeze_embeddings", False)  # a row may freeze them (field=value)
            settings = dict(
                student=student,
                data=[args.data],
                langs=train_langs,
                batch_size=args.batch_size,
                grad_accum=args.grad_accum,
                head_ffn=args.head_ffn,
                lr=args.lr,
                max_steps=args.steps,
                eval_every=args.steps,
                warmup=max(1, args.steps // 10),
                max_seq_length=args.max_seq_length,
                dev_pairs=100,
                projection_fit_pairs=400,
                head_layers=args.head_layers,
                head_heads=args.head_heads,
                output=Path(tmp) / f"{name.replace(' ', '_')}-{seed}",
                seed=seed,
                test_sentences=0,
                model_from="final",
            )
            cfg = TrainConfig(**{**settings, **overrides})  # a row's own field=value wins
            t = time.perf_counter()
            res = train(cfg)
            train_s = time.perf_counter() - t
            # the final weights are exported (model_from="final"), so every variant is judged after the same budget
            report = run_eval(
                EvalConfig(
                    model=str(res.output),
                    tasks=args.tasks.split(","),
                    langs=langs,
                    data=eval_data,
                    max_sentences=args.max_sentences,
                    full=True,  # without --max-sentences: every test verse, not the quick default's subset
                    seed=0,  # the same test verses for every row
                    max_seq_length=args.max_seq_length,
                )
            )
            rows.append(
                {
                    "variant": name,
                    "seed": seed,
                    **metrics(report.tasks),
                    "pairs/s": res.pairs_per_second,
                    "train s": train_s,
                    "best step": res.best_step,
                }
            )
            print(json.dumps(rows[-1]), flush=True)
    if args.dry_run:
        return
    scale = (
        f"{args.student} truncated to {args.small_layers} layers" if args.scale == "small" else args.student
    )
    print(
        f"\nstudent {scale}, seeds {seeds}, {args.steps} steps x {args.batch_size} pairs, lr {args.lr}, langs {args.langs}, "
        f"max length {args.max_seq_length}, MEXMA head {args.head_layers} layers; eval on {args.max_sentences} "
        "test-book verses per language (final weights)"
    )
    print(format_table(rows, columns=list(dict.fromkeys(k for r in rows for k in r))))
    if len(seeds) > 1:
        summary = summarise(rows)
        print("\nmean over seeds (spread = max - min):")
        print(format_table(summary, columns=list(dict.fromkeys(k for r in summary for k in r))))
    if args.compare:
        pairs = [tuple(x.split(":", 1)) for x in args.compare.split(",")]
        table = compare(rows, pairs)
        print("\nA - B per seed, mean and 95% half-width (verdict only where the interval excludes 0):")
        print(format_table(table, columns=list(dict.fromkeys(k for r in table for k in r))))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
