"""``babelspace resources``: the offline models and corpora, with status, path and licence."""

from __future__ import annotations

import argparse


def add_resources_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("resources", help="list the offline models and corpora, with status, path and licence")
    p.add_argument("--materialise", action="store_true", help="build cached models now (e5-small)")
    p.set_defaults(func=run_resources)


def run_resources(args: argparse.Namespace) -> int:
    from babelspace.evaluation.report import format_table
    from babelspace.resources import RESOURCES, list_resources

    if args.materialise:
        for r in RESOURCES.values():
            if r.kind == "model":  # corpora are read in place; an optional one may be missing
                r.locate(True)
    rows = list_resources()
    print(format_table(rows, columns=["name", "kind", "status", "licence", "path"]))
    for r in rows:
        print(f"  {r['name']}: {r['description']} [{r['source']}]")
    return 0
