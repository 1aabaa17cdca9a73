"""The decoder of a bottleneck objective, rebuilt from a training checkpoint (it lives in the
checkpoints, not in the exported model), for :func:`babelspace.objectives.bottleneck.greedy_decode`."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

from safetensors import SafetensorError
from sentence_transformers import SentenceTransformer

from babelspace.checkpoints.files import is_complete, read_weights, verify
from babelspace.errors import ResourceError
from babelspace.models.encoder import embedding_dim
from babelspace.objectives.parts.decoder import SentenceDecoder, decode_language_codes

__all__ = ["load_decoder"]


DECODER_KEY = "decoder.arch"


def _read_objective_state(checkpoint: Path) -> dict[str, Any]:
    """The objective's weights, read without running code (safetensors, or ``state.pt`` with
    ``weights_only=True``) once a checkpoint folder is checked against its manifest."""
    folder = checkpoint if checkpoint.is_dir() else checkpoint.parent
    try:
        if is_complete(folder):
            verify(folder)
        return read_weights(checkpoint)
    except (OSError, RuntimeError, EOFError, pickle.UnpicklingError, SafetensorError) as exc:
        raise ResourceError(f"cannot read checkpoint {checkpoint}: {exc}") from exc


def _prefix(objective: dict[str, Any], state_file: Path) -> str:
    """Key prefix of the bottleneck objective: '' alone, 'objectives.bottleneck.' in a composition."""
    found = [k[: -len(DECODER_KEY)] for k in objective if k.endswith(DECODER_KEY)]
    if not found:
        raise ResourceError(f"{state_file} has no bottleneck decoder; train with --objective bottleneck")
    return found[0]


def load_decoder(model: SentenceTransformer, state_file: Path, weights: str = "checkpoint") -> Any:
    """The decoder of a checkpoint (a ``step-N`` folder or a ``state.pt``:
    :func:`babelspace.checkpoints.files.resolve_checkpoint`), tied to ``model``'s input embeddings.
    With ``weights="checkpoint"`` ``model`` also gets the checkpoint's encoder weights (those the
    decoder was trained with)."""
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
