"""``babelspace decode MODEL_DIR --checkpoint CKPT --tgt-lang xx "text" ...``: generate from sentence vectors.

A model trained with ``--objective bottleneck`` (alone or in a composition) has a decoder that
translates from the sentence vector alone; it lives in the training checkpoints, not in the
exported model. This command rebuilds it from a checkpoint and greedy-decodes each text's vector,
so a user can see what the vector retains (docs/objectives.md).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from babelspace.cli.config_flags import DefaultsFormatter
from babelspace.errors import BabelspaceError

__all__ = ["add_decode_parser", "run_decode"]


class _IntermixedParser(argparse.ArgumentParser):
    """Accepts texts after options (``decode MODEL --checkpoint C "text"``), which plain argparse
    refuses once the first positional chunk has been consumed."""

    _inner = False

    def parse_known_args(self, args=None, namespace=None):  # type: ignore[no-untyped-def]
        if self._inner:
            return super().parse_known_args(args, namespace)
        self._inner = True
        try:
            return self.parse_known_intermixed_args(args, namespace)
        finally:
            self._inner = False


def add_decode_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "decode",
        help="greedy-decode texts from their sentence vectors with a bottleneck checkpoint's decoder",
        formatter_class=DefaultsFormatter,
    )
    p.add_argument("model", help="the exported model folder (or 'e5-small', a folder, a hub id)")
    p.add_argument(
        "--checkpoint",
        type=Path,
        required=True,
        help="a checkpoint folder <output>/checkpoints/step-N, its state.pt, or <output> (newest checkpoint)",
    )
    p.add_argument("texts", nargs="*", help="texts to encode and decode")
    p.add_argument("--file", type=Path, default=None, help="also read texts from this file (one per line)")
    p.add_argument("--max-new-tokens", type=int, default=64, help="most tokens generated per text")
    p.add_argument(
        "--tgt-lang",
        default=None,
        help="language to write (one the decoder was trained for; required unless the checkpoint's "
        "decoder predates target-language conditioning)",
    )
    p.add_argument(
        "--weights",
        choices=["checkpoint", "exported"],
        default="checkpoint",
        help="encoder weights: the checkpoint's (the step the decoder was trained with) or MODEL's own",
    )
    p.set_defaults(func=run_decode)
    p.__class__ = _IntermixedParser


def _texts(args: argparse.Namespace) -> list[str]:
    texts = list(args.texts)
    if args.file is not None:
        if not args.file.is_file():
            raise BabelspaceError(f"input file not found: {args.file}")
        texts += [line.rstrip("\r\n") for line in args.file.read_text(encoding="utf-8").splitlines()]
    if not texts:
        raise BabelspaceError("give texts to decode (arguments or --file)")
    return texts


def run_decode(args: argparse.Namespace) -> int:
    from babelspace.checkpoints.files import resolve_checkpoint
    from babelspace.models.encoder import load_encoder
    from babelspace.objectives.bottleneck import greedy_decode
    from babelspace.objectives.decoding import load_decoder

    if args.max_new_tokens < 1:
        raise BabelspaceError(f"--max-new-tokens must be >= 1, not {args.max_new_tokens}")
    texts = _texts(args)
    checkpoint = resolve_checkpoint(args.checkpoint)
    model = load_encoder(args.model)
    decoder = load_decoder(model, checkpoint, args.weights)
    if decoder.languages and args.tgt_lang is None:
        raise BabelspaceError(f"give --tgt-lang: the decoder writes {', '.join(decoder.languages)}")
    if not decoder.languages and args.tgt_lang is not None:
        raise BabelspaceError("--tgt-lang: this checkpoint's decoder is not conditioned on a target language")
    if args.tgt_lang is not None and args.tgt_lang not in decoder.languages:
        raise BabelspaceError(
            f"--tgt-lang {args.tgt_lang}: the decoder writes {', '.join(decoder.languages)} only"
        )
    decoded = greedy_decode(decoder, model, texts, args.max_new_tokens, tgt_lang=args.tgt_lang)
    for text, out in zip(texts, decoded, strict=True):
        print(f"{text}\t->\t{out}")
    return 0
