"""``babelspace eval MODEL``: parse the flags (built from :class:`EvalConfig`'s fields, plus the
shared encoding flags), call :func:`babelspace.api.evaluate`, print the tables of
:func:`babelspace.evaluation.report.format_report`.

Registered by the top-level CLI through :func:`add_eval_parser`; this module prints, the runner logs.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from babelspace.cli.config_flags import ConfigFlags, DefaultsFormatter, config_kwargs
from babelspace.cli.options import add_encoding_arguments, add_margin_argument, add_progress_argument
from babelspace.evaluation.config import DATA, OUTPUT, QUICK_MAX_SENTENCES, STS_MSE, XSIM, EvalConfig

__all__ = ["add_eval_parser", "run_eval_command"]


def add_eval_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "eval",
        help="evaluate a sentence encoder: xsim, xsim++, Tatoeba, BUCC, STS, MSE to teacher, language bias",
        description=(
            "Evaluate MODEL (a sentence-transformers folder, a hub id, 'minilm' or 'e5-small'). With no "
            "--data it runs on the offline Bible test books for every language (21 non-English languages, "
            f"one shared English pool): by default a quick run ({QUICK_MAX_SENTENCES} verses per language, BUCC "
            "among the evaluated verses), --full for the full-size protocol. See docs/evaluation.md."
        ),
        formatter_class=DefaultsFormatter,
    )
    groups = {
        "positional": p,
        "options": p,
        **{t: p.add_argument_group(t) for t in (DATA, XSIM, STS_MSE, OUTPUT)},
    }
    add_margin_argument(groups[XSIM])
    ConfigFlags(EvalConfig).add_all(p, groups)
    out = groups[OUTPUT]
    out.add_argument(
        "--out", type=Path, default=None, metavar="OUT.json", help="write every figure and its config as JSON"
    )
    add_encoding_arguments(out)
    add_progress_argument(out)
    p.set_defaults(func=run_eval_command)
    return p


def run_eval_command(args: argparse.Namespace) -> int:
    from babelspace.api import evaluate

    options = config_kwargs(EvalConfig, args)
    model = options.pop("model")
    options.update(
        margin=args.margin,
        batch_size=args.batch_size,
        max_seq_length=args.max_seq_length,
        device=args.device,
        backend=args.backend,
        quantize=args.quantize,
        progress=not args.no_progress,  # a bar on a terminal, log lines with ETA otherwise
    )
    result = evaluate(model, tasks=options.pop("tasks", None), data=options.pop("data", None), out=args.out,
                      **options)  # fmt: skip
    print(result)
    return 0
