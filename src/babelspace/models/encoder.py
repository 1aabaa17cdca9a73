"""Teacher and student encoders as sentence-transformers models.

A student is ``[Transformer, Pooling, (its own Dense layers), (Dense projection), (Normalize)]``; the
projection (a *linear* Dense, last before an optional Normalize) maps the student's vector into the
teacher's space. A student that ends in its own non-linear Dense (LaBSE's tanh Dense) keeps it, and
the projection comes after it; its closed-form fit is :mod:`babelspace.models.projection_fit`.
"""

from __future__ import annotations

import copy
import json
import logging
import sys
import zipfile
from collections.abc import Sequence
from contextlib import nullcontext
from pathlib import Path

import numpy as np
import torch
from safetensors import SafetensorError
from sentence_transformers import SentenceTransformer
from sentence_transformers.sentence_transformer.modules import Dense, Normalize, Pooling

from babelspace.device import resolve_device
from babelspace.errors import ResourceError, first_error_line
from babelspace.models.prompts import mteb_prompts
from babelspace.progress import Progress
from babelspace.resources import resolve_model

logger = logging.getLogger(__name__)

#: Texts tokenized at a time to count their tokens (their id lists are dropped after each chunk).
LENGTH_CHUNK = 4096


def load_encoder(
    spec: str, device: str | None = None, max_seq_length: int | None = None
) -> SentenceTransformer:
    """Load a named offline model, a local folder or a hub id as a SentenceTransformer on ``device``
    (``None``/``"auto"``: the best available, see :func:`babelspace.device.resolve_device`)."""
    target = resolve_model(spec)
    where = resolve_device(device)
    try:
        model = SentenceTransformer(target, device=str(where))
    except (OSError, ValueError, KeyError, RuntimeError, TypeError, EOFError, SafetensorError) as exc:
        # a folder that is not a model raises any of these from transformers/sentence-transformers;
        # a truncated weight file a SafetensorError (or EOFError from a pickled .bin)
        raise ResourceError(
            f"cannot load model {spec!r} ({target}): {first_error_line(exc, with_type=True)}"
            f"{_damaged_hint(target, exc)}. Give a sentence-transformers or transformers model folder, a hub "
            "id, or one of the names `babelspace resources` lists"
        ) from exc
    if max_seq_length is not None:
        model.max_seq_length = max_seq_length
    model.prompts = mteb_prompts(model.prompts)  # so what babelspace saves has MTEB's prompt names
    return model


def tokenize(model: SentenceTransformer, texts: list[str]) -> dict:
    """``model``'s input features for ``texts``: sentence-transformers 6 renamed ``tokenize`` to
    ``preprocess`` (same call; ``tokenize`` is a deprecated alias that warns)."""
    return model.preprocess(texts)


def _damaged_hint(target: str, exc: BaseException) -> str:
    """Which weight file is damaged (the model's own or a module's, such as ``3_Dense/``), when the
    error says one is: each is checked, and only a file that fails its check is named."""
    if not (isinstance(exc, (SafetensorError, EOFError)) or "deserializ" in str(exc)):
        return ""
    folder = Path(target)
    files = sorted(folder.rglob("*.safetensors")) + sorted(folder.rglob("*.bin"))
    damaged = [f for f in files if "checkpoints" not in f.relative_to(folder).parts and _weights_damaged(f)]
    if not damaged:
        return ""
    more = f" (and {len(damaged) - 1} more)" if len(damaged) > 1 else ""
    return f" ({damaged[0]}{more} looks truncated or damaged: copy it again)"


def _weights_damaged(path: Path) -> bool:
    """A safetensors file whose header or tensor data is cut short; a zip ``.bin`` that fails its
    CRC check (an older pickled ``.bin`` cannot be checked without loading it: not named)."""
    try:
        size = path.stat().st_size
        if path.suffix == ".bin":
            if not zipfile.is_zipfile(path):
                return False
            with zipfile.ZipFile(path) as archive:
                return archive.testzip() is not None
        with path.open("rb") as fh:
            n = int.from_bytes(fh.read(8), "little")
            if size < 8 + n:
                return True
            header = json.loads(fh.read(n))
        end = max((v["data_offsets"][1] for k, v in header.items() if k != "__metadata__"), default=0)
        return size < 8 + n + end
    except (OSError, ValueError, KeyError, TypeError, IndexError, zipfile.BadZipFile):
        return True


def default_prompt(model: SentenceTransformer) -> str:
    """The prompt ``model.encode`` prepends by default ("" when none)."""
    name = getattr(model, "default_prompt_name", None)
    prompts = getattr(model, "prompts", None) or {}
    return prompts.get(name, "") if name else ""


def encode(
    model: SentenceTransformer,
    texts: Sequence[str],
    batch_size: int = 64,
    show_progress: bool | None = None,
    normalize: bool = True,
) -> np.ndarray:
    """Encode texts to float32 vectors (L2-normalised by default), with the model's default prompt,
    rows in input order. Batches are cut from the texts sorted by token count
    (:func:`token_length_order`), so each batch pads little."""
    if len(texts) == 0:
        return np.zeros((0, embedding_dim(model)), dtype=np.float32)
    show = (
        show_progress if show_progress is not None else logger.isEnabledFor(logging.INFO) and len(texts) > 500
    )
    order = token_length_order(model, texts)
    with torch.inference_mode():
        if order is None:
            vecs = _st_encode(model, list(texts), batch_size, normalize, show and _terminal(model, texts))
        else:
            vecs = _encode_in_order(model, texts, order, batch_size, normalize, show)
    return np.ascontiguousarray(vecs, dtype=np.float32)


def _terminal(model: SentenceTransformer, texts: Sequence[str]) -> bool:
    """Whether a carriage-return bar can be shown; in a log, say once what is encoded instead."""
    if sys.stderr.isatty():
        return True
    logger.info("encoding %d texts with %s", len(texts), type(model).__name__)
    return False


def _st_encode(model: SentenceTransformer, texts: list[str], batch_size: int, normalize: bool, show: bool):
    return model.encode(
        texts,
        batch_size=batch_size,
        show_progress_bar=show,
        convert_to_numpy=True,
        normalize_embeddings=normalize,
    )


def token_length_order(model: SentenceTransformer, texts: Sequence[str]) -> np.ndarray | None:
    """Indices of ``texts``, longest first by the model's token count (cut at its
    ``max_seq_length``). sentence-transformers sorts a call's texts by characters, which in a mix of
    scripts groups texts of unlike token counts: on 2,200 Bible verses in 22 languages its batches of
    64 hold 1.54x the real tokens, token-sorted batches 1.04x. None when the model has no fast
    tokenizer (e.g. a static model: no padding cost) or there is nothing to order."""
    tokenizer = getattr(model, "tokenizer", None)
    if len(texts) < 2 or not getattr(tokenizer, "is_fast", False):
        return None
    limit = getattr(model, "max_seq_length", None)
    lengths = np.empty(len(texts), dtype=np.int64)
    for start in range(0, len(texts), LENGTH_CHUNK):  # only the counts outlive a chunk's ids
        ids = tokenizer(
            list(texts[start : start + LENGTH_CHUNK]),
            add_special_tokens=False,
            truncation=limit is not None,
            max_length=limit,
            return_attention_mask=False,
            return_token_type_ids=False,
        )["input_ids"]
        lengths[start : start + len(ids)] = [len(x) for x in ids]
    return np.argsort(-lengths, kind="stable")


def _encode_in_order(
    model: SentenceTransformer,
    texts: Sequence[str],
    order: np.ndarray,
    batch_size: int,
    normalize: bool,
    show: bool,
) -> np.ndarray:
    """One sentence-transformers call per batch of ``order`` (a call sorts only within itself), the
    vectors written back to their texts' rows."""
    out: np.ndarray | None = None
    with Progress(total=len(texts), desc="encode", unit="text") if show else nullcontext() as bar:
        for start in range(0, len(order), batch_size):
            rows = order[start : start + batch_size]
            vecs = _st_encode(model, [texts[i] for i in rows], batch_size, normalize, False)
            if out is None:
                out = np.empty((len(texts), vecs.shape[1]), dtype=np.float32)
            out[rows] = vecs
            if bar is not None:
                bar.update(len(rows))
    return out


def _dim_of(module: object) -> int | None:
    getter = getattr(module, "get_embedding_dimension", None) or getattr(
        module, "get_sentence_embedding_dimension", None
    )
    return getter() if getter else None


def embedding_dim(model: SentenceTransformer) -> int:
    dim = _dim_of(model)
    if dim is None:
        raise ResourceError("cannot tell the model's embedding dimension")
    return int(dim)


def _pooling_index(model: SentenceTransformer) -> int:
    for i, module in enumerate(model):
        if isinstance(module, Pooling):
            return i
    raise ResourceError(
        "the student has no Pooling module; babelspace students are [Transformer, Pooling, ...]"
    )


def pooled_encoder(model: SentenceTransformer) -> SentenceTransformer:
    """A view of ``model`` that stops at its Pooling module (shares weights, keeps prompts)."""
    idx = _pooling_index(model)
    view = SentenceTransformer(modules=[model[i] for i in range(idx + 1)], device=str(model.device))
    view.prompts = dict(model.prompts or {})
    view.default_prompt_name = model.default_prompt_name
    return view


def is_linear_dense(module: object) -> bool:
    """Whether ``module`` is a sentence-transformers Dense layer without an activation."""
    return isinstance(module, Dense) and isinstance(module.activation_function, torch.nn.Identity)


def projection_index(model: SentenceTransformer) -> int | None:
    """Index of the student's projection: the last module when it is a linear Dense (a trailing
    Normalize aside); None otherwise (e.g. the model ends in a tanh Dense, or has no Dense)."""
    modules = list(model)
    i = len(modules) - 1
    while i >= 0 and isinstance(modules[i], Normalize):
        i -= 1
    return i if i >= 0 and is_linear_dense(modules[i]) else None


def projection_inputs(model: SentenceTransformer) -> SentenceTransformer:
    """A view of ``model`` that stops just before its projection (what the projection reads: the
    pooled vector, or the output of the student's own non-linear Dense); shares weights, keeps prompts."""
    idx = projection_index(model)
    if idx is None:
        raise ResourceError("the student has no linear projection layer")
    view = SentenceTransformer(modules=[model[i] for i in range(idx)], device=str(model.device))
    view.prompts = dict(model.prompts or {})
    view.default_prompt_name = model.default_prompt_name
    return view


def _output_dim(modules: list[torch.nn.Module], pooling: int) -> int | None:
    """Width of what the modules output: the last Dense's, else the Pooling's."""
    for module in reversed(modules):
        if isinstance(module, Dense):
            return int(module.out_features)
    return _dim_of(modules[pooling])


def make_student(
    student: str | SentenceTransformer,
    teacher: SentenceTransformer,
    projection: str = "auto",
    max_seq_length: int | None = None,
    drop_normalize: bool = False,
) -> SentenceTransformer:
    """Build the student. ``student="teacher"`` copies the teacher (the paper's monolingual-vocabulary
    baseline). ``projection``: "auto" adds a Dense layer only when dimensions differ, "always" adds one
    (so it can be initialised by :func:`fit_projection`), "none" never (then dimensions must match).
    ``drop_normalize`` removes a final Normalize module, so the student's raw output is what the MSE
    loss fits (the paper's setting; cosine evaluation normalises anyway)."""
    if isinstance(student, SentenceTransformer):
        model = student
    elif student == "teacher":
        model = copy.deepcopy(teacher)
    else:
        model = load_encoder(student, device=str(teacher.device))
    if max_seq_length is not None:
        model.max_seq_length = max_seq_length
    t_dim = embedding_dim(teacher)
    modules = list(model)
    s_dim = _output_dim(modules, _pooling_index(model))
    has_projection = projection_index(model) is not None
    if projection not in {"auto", "always", "none"}:
        raise ValueError(f"projection must be auto, always or none, not {projection!r}")
    if projection == "none" and s_dim != t_dim and not has_projection:
        raise ResourceError(f"student dim {s_dim} != teacher dim {t_dim}: a projection is required")
    changed = False
    if not has_projection and (projection == "always" or s_dim != t_dim):
        # last, before a Normalize: after the student's own (possibly non-linear) Dense layers
        at = len(modules) - 1 if isinstance(modules[-1], Normalize) else len(modules)
        modules.insert(at, Dense(s_dim, t_dim, bias=True, activation_function=torch.nn.Identity()))
        changed = True
    if drop_normalize and isinstance(modules[-1], Normalize):
        modules = modules[:-1]
        changed = True
    if changed:
        prompts, prompt_name = dict(model.prompts or {}), model.default_prompt_name
        max_len = model.max_seq_length
        model = SentenceTransformer(modules=modules, device=str(model.device))
        model.prompts, model.default_prompt_name = prompts, prompt_name
        model.max_seq_length = max_len
    return model


def projection_layer(model: SentenceTransformer) -> Dense | None:
    """The student's linear projection (:func:`projection_index`), or None."""
    idx = projection_index(model)
    return None if idx is None else model[idx]
