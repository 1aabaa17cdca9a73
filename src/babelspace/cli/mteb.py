"""``babelspace mteb MODEL --task NAME=DIR ... [--out DIR] [--update-card]``: MTEB tasks run offline
from local copies of their data (:mod:`babelspace.integrations.mteb`); MTEB's result files under
``--out``, and with ``--update-card`` its entries in the model card's ``model-index``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from babelspace.cli.config_flags import DefaultsFormatter
from babelspace.cli.options import add_batching_arguments, add_device_argument, add_progress_argument
from babelspace.hub import hub_repo_id

__all__ = ["add_mteb_parser", "run_mteb_command", "task_source"]


def task_source(value: str):  # noqa: ANN201 - a TaskSource (its module is imported lazily)
    """argparse type of ``--task``: ``NAME`` or ``NAME=DIR``."""
    from babelspace.integrations.mteb.local_data import TaskSource

    name, sep, folder = value.partition("=")
    if not name.strip() or (sep and not folder.strip()):
        raise argparse.ArgumentTypeError(f"expected NAME or NAME=DIR, got {value!r}")
    return TaskSource(name.strip(), Path(folder.strip()).expanduser() if sep else None)


def _codes(value: str) -> list[str]:
    codes = [v.strip() for v in value.split(",") if v.strip()]
    if not codes:
        raise argparse.ArgumentTypeError("expected comma-separated ISO 639-3 codes such as deu,fra")
    return codes


def add_mteb_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "mteb",
        help="run MTEB tasks offline from local copies of their data; results into the model card",
        description=(
            "Run MTEB tasks on MODEL (a sentence-transformers folder, with its saved prompts) offline: each "
            "task's data is read from a local copy of its Hugging Face dataset (the folder `hf download "
            "REPO --repo-type dataset --revision REV --local-dir DIR` writes, or a hub cache holding it). "
            "MTEB's result files go under --out; --update-card adds MTEB's model-index entries to "
            "MODEL/README.md. See docs/evaluation.md#mteb."
        ),
        formatter_class=DefaultsFormatter,
    )
    p.add_argument(
        "model", help="a sentence-transformers folder ('minilm', 'e5-small' or a cached hub id work too)"
    )
    p.add_argument(
        "--task",
        dest="tasks",
        type=task_source,
        action="append",
        required=True,
        metavar="NAME[=DIR]",
        help="an MTEB task (repeat for more) and the local copy of its dataset; without =DIR, the "
        "Hugging Face hub cache",
    )
    p.add_argument(
        "--languages",
        type=_codes,
        default=None,
        metavar="CODES",
        help="comma-separated ISO 639-3 codes (deu,fra): only the subsets in these languages "
        "(default: every subset)",
    )
    p.add_argument(
        "--out", type=Path, default=Path("mteb-results"), metavar="DIR", help="MTEB's results folder"
    )
    p.add_argument(
        "--update-card",
        action="store_true",
        help="add MTEB's model-index entries (and the mteb tag) to MODEL/README.md",
    )
    p.add_argument(
        "--model-name",
        type=hub_repo_id,
        default=None,
        metavar="ORG/NAME",
        help="the model's name in MTEB's results (default: local/FOLDER_NAME)",
    )
    add_batching_arguments(p)
    add_device_argument(p)
    add_progress_argument(p)
    # hub_offline: main() sets HF_HUB_OFFLINE=1 before huggingface_hub is imported (it reads it once)
    p.set_defaults(func=run_mteb_command, hub_offline=True)
    return p


def run_mteb_command(args: argparse.Namespace) -> int:
    from babelspace.integrations.mteb.card import card_path, update_card
    from babelspace.integrations.mteb.runner import run_mteb
    from babelspace.writable import check_output

    readme = card_path(args.model) if args.update_card else None
    inputs = [("--task", s.data) for s in args.tasks]
    check_output(args.out, "--out", inputs=inputs, models=[("MODEL", args.model)], folder=True)
    run = run_mteb(
        args.model,
        args.tasks,
        args.out,
        languages=args.languages,
        device=args.device,
        batch_size=args.batch_size,
        max_seq_length=args.max_seq_length,
        model_name=args.model_name,
        progress=not args.no_progress,
    )
    print(f"{run.model_name} (revision {run.revision})")
    for result, path in zip(run.results, run.files, strict=True):
        for split, scores in result.scores.items():
            for s in scores:
                metric = result.task.metadata.main_score
                print(
                    f"  {result.task_name} {s.get('hf_subset', 'default')} {split}: {metric} {s['main_score']:.4f}"
                )
        print(f"wrote {path}")
    if readme is not None:
        print(f"wrote {update_card(readme, run.results, run.model_name)}")
    return 0
