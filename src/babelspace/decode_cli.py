"""``babelspace decode MODEL_DIR --checkpoint CKPT --tgt-lang xx "text" ...``: generate from sentence vectors.

A model trained with ``--objective bottleneck`` (alone or in a composition) has a decoder that
translates from the sentence vector alone; it lives in the training checkpoints, not in the
exported model. This command rebuilds it from a checkpoint and greedy-decodes each text's vector,
so a user can see what the vector retains (docs/objectives.md). A decoder trained with target
languages writes the one ``--tgt-lang`` names.
"""

from __future__ import annotations

import argparse
import pickle
from pathlib import Path
from typing import Any

import torch
from sentence_transformers import SentenceTransformer

from babelspace.errors import BabelspaceError, ResourceError

__all__ = ["add_decode_parser", "find_state_file", "load_decoder", "run_decode"]

STATE_FILE = "state.pt"
DECODER_KEY = "decoder.arch"


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
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
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
    p.add_argument("--max-len", type=int, default=64, help="most tokens generated per text")
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


def find_state_file(path: Path) -> Path:
    """``state.pt`` given itself, its step folder, or an output folder (newest complete step)."""
    path = Path(path)
    if path.is_file():
        return path
    if (path / STATE_FILE).is_file():
        return path / STATE_FILE
    root = path / "checkpoints"
    steps = sorted(
        (p for p in root.glob("step-*") if (p / STATE_FILE).is_file() and p.name[5:].isdigit()),
        key=lambda p: int(p.name[5:]),
    )
    if not steps:
        raise ResourceError(
            f"no checkpoint at {path}: give <output>/checkpoints/step-N (train with --save-every N)"
        )
    return steps[-1] / STATE_FILE


def _read_objective_state(state_file: Path) -> dict[str, Any]:
    try:
        state = torch.load(state_file, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        raise BabelspaceError(
            f"{state_file} holds objects other than tensors and plain types; refusing to load it ({exc})"
        ) from exc
    except (OSError, RuntimeError, EOFError) as exc:
        raise ResourceError(f"cannot read checkpoint {state_file}: {exc}") from exc
    objective = state.get("objective") if isinstance(state, dict) else None
    if not isinstance(objective, dict):
        raise ResourceError(f"{state_file} is not a babelspace training checkpoint (no objective state)")
    return objective


def _prefix(objective: dict[str, Any], state_file: Path) -> str:
    """Key prefix of the bottleneck objective: '' alone, 'objectives.bottleneck.' in a composition."""
    found = [k[: -len(DECODER_KEY)] for k in objective if k.endswith(DECODER_KEY)]
    if not found:
        raise ResourceError(f"{state_file} has no bottleneck decoder; train with --objective bottleneck")
    return found[0]


def load_decoder(model: SentenceTransformer, state_file: Path, weights: str = "checkpoint") -> Any:
    """The checkpoint's decoder, tied to ``model``'s input embeddings. With ``weights="checkpoint"``
    ``model`` also gets the checkpoint's encoder weights (those the decoder was trained with)."""
    from babelspace.encoder import embedding_dim
    from babelspace.objectives.bottleneck import SentenceDecoder, decode_language_codes

    objective = _read_objective_state(state_file)
    prefix = _prefix(objective, state_file)
    sub = {k[len(prefix) :]: v for k, v in objective.items() if k.startswith(prefix)}
    if weights == "checkpoint":
        student = {k[len("student.") :]: v for k, v in sub.items() if k.startswith("student.")}
        try:
            model.load_state_dict(student)
        except RuntimeError as exc:
            raise ResourceError(
                f"the encoder in {state_file} does not match the model ({exc}); use --weights exported"
            ) from exc
    layers, heads, positions = (int(x) for x in sub[DECODER_KEY].tolist())
    emb = model[0].auto_model.get_input_embeddings().weight
    dec = {k[len("decoder.") :]: v for k, v in sub.items() if k.startswith("decoder.")}
    try:  # vocab_ids: the restricted target vocabulary (--decoder-vocab), absent for the full one;
        # lang_codes: the target languages, absent for a decoder without language conditioning
        decoder = SentenceDecoder(
            embedding_dim(model),
            emb,
            layers,
            heads,
            positions,
            0.0,
            vocab_ids=dec.get("vocab_ids"),
            languages=decode_language_codes(dec.get("lang_codes")),
        )
    except ValueError as exc:
        raise ResourceError(f"decoder in {state_file} does not fit the model: {exc}") from exc
    dec.pop("output.weight", None)  # the tied embedding matrix: the model's own (set above if asked)
    missing, unexpected = decoder.load_state_dict(dec, strict=False)
    if [k for k in missing if k != "output.weight"] or unexpected:
        raise ResourceError(
            f"decoder in {state_file} does not match: missing {missing}, unexpected {unexpected}"
        )
    return decoder.to(emb.device)


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
    from babelspace.encoder import load_encoder
    from babelspace.objectives.bottleneck import greedy_decode

    if args.max_len < 1:
        raise BabelspaceError(f"--max-len must be >= 1, not {args.max_len}")
    texts = _texts(args)
    state_file = find_state_file(args.checkpoint)
    model = load_encoder(args.model)
    decoder = load_decoder(model, state_file, args.weights)
    if decoder.languages and args.tgt_lang is None:
        raise BabelspaceError(f"give --tgt-lang: the decoder writes {', '.join(decoder.languages)}")
    if not decoder.languages and args.tgt_lang is not None:
        raise BabelspaceError("--tgt-lang: this checkpoint's decoder is not conditioned on a target language")
    if args.tgt_lang is not None and args.tgt_lang not in decoder.languages:
        raise BabelspaceError(
            f"--tgt-lang {args.tgt_lang}: the decoder writes {', '.join(decoder.languages)} only"
        )
    decoded = greedy_decode(decoder, model, texts, args.max_len, tgt_lang=args.tgt_lang)
    for text, out in zip(texts, decoded, strict=True):
        print(f"{text}\t->\t{out}")
    return 0
