"""``babelspace push MODEL ORG/NAME``: publish a saved model folder to the Hugging Face Hub
(:func:`babelspace.training.output.publish.push_model`); ``babelspace train --push-to-hub`` shares the flags below."""

from __future__ import annotations

import argparse

from babelspace.hub import hub_repo_id

__all__ = ["add_hub_arguments", "add_push_parser", "run_push"]


def add_hub_arguments(group: argparse._ActionsContainer, *, repo_flag: bool) -> None:
    """``--hub-private`` (and, for ``train``, ``--push-to-hub ORG/NAME``)."""
    if repo_flag:
        group.add_argument(
            "--push-to-hub",
            type=hub_repo_id,
            default=None,
            metavar="ORG/NAME",
            help="after training, upload the saved model with a card naming ORG/NAME (needs a token; "
            "checked before training)",
        )
    group.add_argument(
        "--hub-private", action="store_true", help="create the Hub repository as private (if it is new)"
    )


def add_push_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "push",
        help="upload a saved model folder to the Hugging Face Hub, its card naming the repository",
        description="Upload MODEL (a folder written by babelspace train, or any sentence-transformers "
        "folder) to the Hub repository REPO (created if missing). Checkpoints and logs stay local.",
    )
    p.add_argument("model", help="a saved model folder")
    p.add_argument("repo", type=hub_repo_id, metavar="ORG/NAME", help="the Hub repository")
    add_hub_arguments(p, repo_flag=False)
    p.set_defaults(func=run_push)


def run_push(args: argparse.Namespace) -> int:
    from babelspace.training.output.publish import push_model

    url = push_model(args.model, args.repo, private=args.hub_private)
    print(f"uploaded {args.model} to {url}")
    return 0
