"""``babelspace eval MODEL``: parse arguments, run :mod:`babelspace.evaluation.runner`, print tables.

Registered by the top-level CLI through :func:`add_eval_parser`; this module prints, the runner logs.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from babelspace.argtypes import positive_int
from babelspace.errors import BabelspaceError
from babelspace.evaluation.tasks import ALL_TASKS, TASKS, parse_tasks

__all__ = ["add_eval_parser", "format_report", "run_eval_command"]


def _task_list(value: str) -> list[str]:
    try:
        return parse_tasks(value)
    except BabelspaceError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def add_eval_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "eval",
        help="evaluate a sentence encoder: xsim, xsim++, Tatoeba, BUCC, STS, MSE to teacher, language bias",
        description=(
            "Evaluate MODEL (a sentence-transformers folder, a hub id, 'minilm' or 'e5-small'). With no "
            "--data it runs on the offline Bible test books for every language (21 non-English languages, "
            "one shared English pool). See docs/evaluation.md for the protocols."
        ),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("model", help="'minilm', 'e5-small', a sentence-transformers folder or a hub id")
    p.add_argument(
        "--task",
        type=_task_list,
        default="all",  # a string default goes through type=, so args.task is always a list
        metavar="TASKS",
        help=f"comma-separated tasks from {','.join(ALL_TASKS)}, or 'all'",
    )
    g = p.add_argument_group("data")
    g.add_argument(
        "--data",
        nargs="+",
        default=None,
        metavar="PATH",
        help="evaluation pairs: 'bible', a TSV file, 'SRC_FILE,TGT_FILE' or a Hugging Face dataset folder "
        "(default: the Bible test books)",
    )
    g.add_argument("--langs", default=None, help="comma-separated language codes (default: every language)")
    g.add_argument("--src-lang", default=None, help="source language of 2-column TSV / aligned files")
    g.add_argument("--tgt-lang", default=None, help="target language of 2-column TSV / aligned files")
    g.add_argument(
        "--max-sentences",
        type=positive_int,
        default=None,
        help="seeded random subset of the evaluation pairs per language (the same verses for every language)",
    )
    g.add_argument(
        "--seed", type=int, default=0, help="seed of subsets, BUCC construction and xsim++ negatives"
    )
    x = p.add_argument_group("xsim / xsim++ / BUCC")
    x.add_argument("--margin", choices=["ratio", "distance", "absolute"], default="ratio")
    x.add_argument("--k", type=positive_int, default=4, help="neighbourhood size of the margin")
    x.add_argument(
        "--direction", choices=["xx2en", "both"], default="xx2en", help="xsim: xx->en only, or also en->xx"
    )
    x.add_argument(
        "--xsimpp-files",
        nargs=2,
        metavar=("AUGMENTED", "TYPES"),
        default=None,
        help="xsim++ with released files: the augmented English file and its error-type JSON "
        "(sources are matched by English text in the evaluation data)",
    )
    x.add_argument("--tatoeba-dir", default=None, help="LASER Tatoeba folder (tatoeba.xxx-eng.{xxx,eng})")
    x.add_argument("--bucc-dir", default=None, help="BUCC 2018 folder (xx-en.{training,test}.{xx,en,gold})")
    x.add_argument(
        "--bucc-ratio",
        type=float,
        default=4.0,
        help="built BUCC task: distractors per gold pair per side (ignored with --bucc-dir)",
    )
    s = p.add_argument_group("STS / MSE")
    s.add_argument("--sts", nargs="+", default=[], metavar="FILE", help="STS17-style or STSb files")
    s.add_argument("--teacher", default="minilm", help="teacher of the mse task")
    o = p.add_argument_group("output and speed")
    o.add_argument("--json", type=Path, default=None, metavar="OUT", help="write every figure and its config")
    o.add_argument(
        "--plots", type=Path, default=None, metavar="DIR", help="write per-task bar PNGs and a PCA"
    )
    o.add_argument("--batch-size", type=positive_int, default=64)
    o.add_argument("--max-seq-length", type=positive_int, default=None)
    o.add_argument("--device", default=None, help="torch device (default cpu)")
    from babelspace.export_cli import add_backend_arguments

    add_backend_arguments(o)
    o.add_argument("--no-progress", action="store_true", help="no progress bars")
    p.set_defaults(func=run_eval_command)
    return p


def _config_from_args(args: argparse.Namespace) -> Any:
    from babelspace.evaluation.runner import EvalConfig

    langs = [v.strip() for v in args.langs.split(",") if v.strip()] if args.langs else None
    return EvalConfig(
        model=args.model,
        tasks=list(args.task),
        data=args.data,
        langs=langs,
        src_lang=args.src_lang,
        tgt_lang=args.tgt_lang,
        teacher=args.teacher,
        margin=args.margin,
        k=args.k,
        direction=args.direction,
        max_sentences=args.max_sentences,
        seed=args.seed,
        batch_size=args.batch_size,
        max_seq_length=args.max_seq_length,
        device=args.device,
        backend=args.backend,
        quantize=args.quantize,
        xsimpp_files=tuple(str(f) for f in args.xsimpp_files) if args.xsimpp_files else None,
        tatoeba_dir=args.tatoeba_dir,
        bucc_dir=args.bucc_dir,
        bucc_ratio=args.bucc_ratio,
        sts_files=[str(f) for f in args.sts],
        plots_dir=str(args.plots) if args.plots else None,
        progress=not args.no_progress and sys.stderr.isatty(),
    )


def run_eval_command(args: argparse.Namespace) -> int:
    from babelspace.evaluation.report import write_json
    from babelspace.evaluation.runner import run_eval

    cfg = _config_from_args(args)
    report = run_eval(cfg)
    print(format_report(report))
    if args.json is not None:
        write_json(args.json, report.to_dict())
        print(f"\nwrote {args.json}")
    for path in report.plots:
        print(f"wrote {path}")
    return 0


# --------------------------------------------------------------------------- tables


_LANG_TASKS = ("xsim", "xsimpp", "tatoeba", "bucc", "mse")


def format_report(report: Any) -> str:
    """The terminal summary: per-language table, details per task, skipped tasks and timings."""
    from babelspace.evaluation.report import format_table

    tasks = report.tasks
    out: list[str] = [f"model: {report.model}"]
    if report.data:
        out.append(f"data: {report.data.get('description', '')}")

    columns: list[tuple[str, str, str]] = []  # (header, task, key)
    for name in _LANG_TASKS:
        r = tasks.get(name)
        if r is None or r.status != "ok":
            continue
        columns.append((TASKS[name].column, name, r.metric))
        if name == "xsim" and r.config.get("direction") == "both":
            columns.append(("xsim en->xx err%", name, "en2xx_error_rate"))
    if columns:
        langs: list[str] = []
        for _, name, _ in columns:
            langs.extend(lang for lang in tasks[name].per_language if lang not in langs and lang != "en")
        if any("en" in tasks[name].per_language for _, name, _ in columns):
            langs.append("en")
        rows = []
        for lang in langs:
            row: dict[str, Any] = {"lang": lang}
            for header, name, key in columns:
                row[header] = tasks[name].per_language.get(lang, {}).get(key)
            rows.append(row)
        avg: dict[str, Any] = {"lang": "avg"}
        for header, name, key in columns:
            avg[header] = tasks[name].average.get(key)
        rows.append(avg)
        out.append("")
        out.append(format_table(rows, columns=["lang", *(c[0] for c in columns)]))
        notes = ["avg: micro-average (pooled errors) for xsim and xsim++, mean over languages otherwise"]
        if "mse" in tasks and tasks["mse"].status == "ok":
            notes.append("mse row 'en': student(English) vs teacher(English), not in the average")
        if "xsim" in tasks and tasks["xsim"].status == "ok":
            c = tasks["xsim"].config
            notes.append(f"xsim: margin {c['margin']}, k={c['k']}, direction {c['direction']}")
        out.extend(notes)

    r = tasks.get("geometry")
    if r is not None and r.status == "ok":
        keys = ("effective_rank", "anisotropy", "hubness_skew")
        rows = [{"lang": lang, **{k: v.get(k) for k in keys}} for lang, v in r.per_language.items()]
        rows.append({"lang": "avg", **{k: r.average.get(k) for k in keys}})
        title = f"geometry (language share of the variance: {r.average.get('language_share'):.3f}):"
        out += ["", format_table(rows, columns=["lang", *keys], title=title)]

    r = tasks.get("xsimpp")
    if r is not None and r.status == "ok":
        types = list(r.average.get("error_rate_by_type", {}))
        rows = [
            {"lang": lang, **{t: v["error_rate_by_type"].get(t) for t in types}, "total": v["error_rate"]}
            for lang, v in r.per_language.items()
        ]
        rows.append({"lang": "avg", **r.average["error_rate_by_type"], "total": r.average["error_rate"]})
        out.append("")
        out.append(
            format_table(
                rows, columns=["lang", *types, "total"], title="xsim++ error % by winning negative type:"
            )
        )
        out.append(f"negatives: {r.config.get('negatives')}")

    r = tasks.get("tatoeba")
    if r is not None and r.status == "ok":
        rows = [
            {
                "lang": lang,
                "xx->en": v["xx2en_accuracy"],
                "en->xx": v["en2xx_accuracy"],
                "mean": v["mean_accuracy"],
            }
            for lang, v in r.per_language.items()
        ]
        a = r.average
        rows.append(
            {
                "lang": "avg",
                "xx->en": a["xx2en_accuracy"],
                "en->xx": a["en2xx_accuracy"],
                "mean": a["mean_accuracy"],
            }
        )
        out.append("")
        out.append(format_table(rows, title="tatoeba accuracy % (cosine top-1):"))

    r = tasks.get("bucc")
    if r is not None and r.status == "ok":
        rows = [
            {
                "lang": lang,
                "P": v["precision"],
                "R": v["recall"],
                "F1": v["f1"],
                "train F1": v["train_f1"],
                "threshold": v["threshold"],
            }
            for lang, v in r.per_language.items()
        ]
        out.append("")
        out.append(format_table(rows, title="bucc (threshold tuned on training, applied to test):"))
        out.append(f"data: {r.config.get('data')}")

    for name, title in (("sts", "sts Spearman x 100:"), ("bias", "language bias (Spearman x 100):")):
        r = tasks.get(name)
        if r is None or r.status != "ok":
            continue
        rows = [{"set": k, "spearman": v["spearman"], "n": v["n"]} for k, v in r.per_language.items()]
        if name == "sts":
            rows.append({"set": "mean", "spearman": r.average["spearman"]})
        out.append("")
        out.append(format_table(rows, title=title))
        if name == "bias":
            a = r.average
            out.append(
                f"mean of sets {a['mean_per_set']:.2f}, joined {a['joined']:.2f}, drop {a['drop']:.2f} "
                "(positive drop: scores depend on the language pair)"
            )

    notes = [n for r in tasks.values() for n in r.notes]
    skipped = [(name, r.reason) for name, r in tasks.items() if r.status != "ok"]
    if skipped or notes:
        out.append("")
    for name, reason in skipped:
        out.append(f"{name}: SKIPPED - {reason}")
    for n in notes:
        out.append(f"note: {n}")

    out.append("")
    timing = ", ".join(
        f"{name} {r.wall_time_s:.1f}s (encode {r.encode_time_s:.1f}s)" for name, r in tasks.items()
    )
    student = report.encoding.get("student") or {}
    out.append(
        f"time: {timing}; total {report.wall_time_s:.1f}s; "
        f"{student.get('texts_encoded', 0)} distinct texts encoded by the model"
    )
    return "\n".join(out)
