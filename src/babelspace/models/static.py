"""A static student: a trained encoder distilled into per-token vectors, for corpus-scale encoding.

The idea is model2vec's (Tulkens & van Dongen 2024): run every vocabulary token through the model
once, in the context ``[CLS] prompt token [SEP]``, keep its pooled output as that token's vector, and
encode a sentence as the (weighted) mean of its tokens' vectors — sentence-transformers'
``StaticEmbedding``, an ``EmbeddingBag``, with no attention at all. babelspace keeps the parent's
output space: ``StaticEmbedding`` replaces the parent's ``Transformer`` and ``Pooling`` only, and
every module after the pooling (the distillation projection, ``Normalize``, the export map into the
teacher's raw space) is copied as it is, so the static model's vectors live where its parent's do.

Token weights (``weighting``):

* ``zipf`` (default): a token's vector is scaled by ``log(2 + rank)``, its id taken as its frequency
  rank, as model2vec does for sentencepiece vocabularies (ids sorted by score): frequent pieces
  (``▁the``, punctuation) weigh less in the mean, an IDF proxy;
* ``none``: the plain mean.

The result is a plain sentence-transformers folder (``StaticEmbedding`` + the parent's tail), so
``SentenceTransformer(folder)`` loads it and ``babelspace encode``/``mine``/``score`` take it as a
fast first pass (candidate generation), to re-score with the full student.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch
from sentence_transformers import SentenceTransformer
from sentence_transformers.sentence_transformer.modules import Dense, StaticEmbedding, Transformer

from babelspace.errors import ResourceError
from babelspace.models.encoder import default_prompt, pooled_encoder
from babelspace.progress import Progress

logger = logging.getLogger(__name__)

Weighting = Literal["zipf", "none"]
WEIGHTINGS: tuple[str, ...] = ("zipf", "none")


def _hf_tokenizer(parent: SentenceTransformer):  # noqa: ANN202 - a transformers fast tokenizer
    first = parent[0]
    tokenizer = getattr(first, "tokenizer", None)
    if not isinstance(first, Transformer) or tokenizer is None or not getattr(tokenizer, "is_fast", False):
        raise ResourceError(
            "a static student needs a parent whose first module is a Transformer with a fast tokenizer"
        )
    return tokenizer


def _token_ids(tokenizer, vocab_size: int | None, texts: Sequence[str] | None) -> np.ndarray:  # noqa: ANN001
    """The ids to distil: every id but the special tokens, or only those ``texts`` tokenize into;
    then the first ``vocab_size`` of them (the lowest ids: a sentencepiece vocabulary's most frequent)."""
    special = set(tokenizer.all_special_ids)
    if texts is None:
        candidates = range(len(tokenizer))
    else:
        seen: set[int] = set()
        for start in range(0, len(texts), 10_000):
            batch = tokenizer(list(texts[start : start + 10_000]), add_special_tokens=False)["input_ids"]
            seen.update(i for row in batch for i in row)
        candidates = sorted(seen)
    ids = np.array([i for i in candidates if i not in special], dtype=np.int64)
    return ids if vocab_size is None else ids[:vocab_size]


def _template(tokenizer, prompt: str) -> tuple[list[int], list[int]]:  # noqa: ANN001
    """``(before, after)``: the ids around a token in ``[CLS] prompt token [SEP]``, read off the
    tokenizer's own template (whatever its special tokens are)."""
    probe_bare = tokenizer("a", add_special_tokens=False)["input_ids"]
    probe_full = tokenizer("a", add_special_tokens=True)["input_ids"]
    for lead in range(len(probe_full) - len(probe_bare) + 1):
        if probe_full[lead : lead + len(probe_bare)] == probe_bare:
            prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"] if prompt else []
            return probe_full[:lead] + prompt_ids, probe_full[lead + len(probe_bare) :]
    raise ResourceError("cannot read the special tokens around a text off this tokenizer's template")


def _context_batch(
    tokenizer, template: tuple[list[int], list[int]], ids: np.ndarray
) -> dict[str, torch.Tensor]:  # noqa: ANN001
    """``[CLS] prompt token [SEP]`` for each id, as the parent's Transformer takes it."""
    before, after = template
    input_ids = torch.tensor([[*before, int(i), *after] for i in ids], dtype=torch.long)
    features = {"input_ids": input_ids, "attention_mask": torch.ones_like(input_ids)}
    if "token_type_ids" in tokenizer.model_input_names:
        features["token_type_ids"] = torch.zeros_like(input_ids)
    return features


def token_vectors(
    parent: SentenceTransformer,
    vocab_size: int | None = None,
    batch_size: int = 1024,
    show_progress: bool = True,
    texts: Sequence[str] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """``(ids, vectors)``: each vocabulary token's pooled output of ``parent`` (before the modules
    that follow the pooling), in the context of the parent's default prompt; ``texts``: only the
    tokens they contain."""
    tokenizer = _hf_tokenizer(parent)
    pooled = pooled_encoder(parent)
    template = _template(tokenizer, default_prompt(parent))
    ids = _token_ids(tokenizer, vocab_size, texts)
    if len(ids) == 0:
        raise ResourceError("no vocabulary token to distil (empty --static-vocab-from texts?)")
    out = np.zeros((len(ids), pooled.get_embedding_dimension()), dtype=np.float32)
    progress = Progress(
        desc="static: token vectors", total=len(ids), unit="tokens", disable=not show_progress
    )
    was_training = parent.training
    parent.eval()  # no dropout in the token vectors
    with torch.inference_mode():
        for start in range(0, len(ids), batch_size):
            chunk = ids[start : start + batch_size]
            features = {k: v.to(parent.device) for k, v in _context_batch(tokenizer, template, chunk).items()}
            for module in pooled:
                features = module(features)
            out[start : start + len(chunk)] = features["sentence_embedding"].float().numpy(force=True)
            progress.update(len(chunk))
    progress.close()
    parent.train(was_training)
    return ids, out


def token_weights(ids: np.ndarray, weighting: Weighting) -> np.ndarray:
    """Per-token weight of the mean (``zipf``: ``log(2 + rank)``, the id as the frequency rank)."""
    if weighting == "none":
        return np.ones(len(ids), dtype=np.float32)
    if weighting == "zipf":
        return np.log(2.0 + ids.astype(np.float64)).astype(np.float32)
    raise ResourceError(f"static weighting must be one of {', '.join(WEIGHTINGS)}, not {weighting!r}")


def fit_linear_map(static: SentenceTransformer, parent: SentenceTransformer, texts: Sequence[str]) -> Dense:
    """``W x + b`` from the static mean of ``texts``' token vectors onto ``parent``'s pooled vectors of
    the same texts: ridge least squares on centred data (ridge 1e-3 x the mean variance). The mean of
    single-token vectors is dominated by what every token shares (the prompt's context); the map
    restores the parent's spread around its own mean, as a projection does after pooling."""
    x = static.encode(list(texts), batch_size=1024, convert_to_numpy=True, normalize_embeddings=False)
    y = pooled_encoder(parent).encode(
        list(texts), batch_size=64, convert_to_numpy=True, normalize_embeddings=False
    )
    x, y = x.astype(np.float64), y.astype(np.float64)
    mx, my = x.mean(0), y.mean(0)
    xc, yc = x - mx, y - my
    gram = xc.T @ xc
    ridge = 1e-3 * np.trace(gram) / len(gram)
    w = np.linalg.solve(gram + ridge * np.eye(len(gram)), xc.T @ yc)  # [d_in, d_out]
    layer = Dense(x.shape[1], y.shape[1], bias=True, activation_function=torch.nn.Identity())
    with torch.no_grad():
        layer.linear.weight.copy_(torch.as_tensor(w.T, dtype=torch.float32))
        layer.linear.bias.copy_(torch.as_tensor(my - mx @ w, dtype=torch.float32))
    return layer.to(parent.device)


def distil_static(
    parent: SentenceTransformer,
    *,
    vocab_size: int | None = None,
    texts: Sequence[str] | None = None,
    fit_texts: Sequence[str] | None = None,
    weighting: Weighting = "zipf",
    batch_size: int = 1024,
    show_progress: bool = True,
) -> SentenceTransformer:
    """A ``StaticEmbedding`` model in ``parent``'s output space (module docstring). ``texts``
    restricts the vocabulary to the tokens they contain (a corpus vocabulary: fewer forward passes);
    tokens left out get a zero vector, which adds nothing to a sentence's direction. ``fit_texts``:
    sentences on which a linear map from the static mean onto the parent's pooled vectors is fitted
    (:func:`fit_linear_map`, placed before the parent's tail); without them the mean goes to the
    tail as it is."""
    tokenizer = _hf_tokenizer(parent)
    ids, vectors = token_vectors(parent, vocab_size, batch_size, show_progress, texts)
    table = np.zeros((len(tokenizer), vectors.shape[1]), dtype=np.float32)
    table[ids] = vectors * token_weights(ids, weighting)[:, None]
    static = StaticEmbedding(tokenizer.backend_tokenizer, embedding_weights=table)
    head = [static]
    if fit_texts:
        bare = SentenceTransformer(modules=[static], device=str(parent.device))
        head.append(fit_linear_map(bare, parent, fit_texts))
    tail = [copy.deepcopy(parent[i]) for i in range(len(pooled_encoder(parent)), len(parent))]
    model = SentenceTransformer(modules=[*head, *tail], device=str(parent.device))
    model.prompts = {}  # the prompt is inside every token vector; prepending it would add its tokens
    model.default_prompt_name = None
    logger.info(
        "static student: %d token vectors of %d dimensions (%s weighting%s)",
        len(ids),
        table.shape[1],
        weighting,
        f", linear map fitted on {len(fit_texts)} sentences" if fit_texts else "",
    )
    return model


def distilled_tokens(static: SentenceTransformer) -> int:
    """How many token vectors a static model holds: the rows of its table that are not zero (a token
    left out of the distillation is a zero row, of the tokenizer's full size)."""
    weight = static[0].embedding.weight
    return int((weight.detach().abs().sum(dim=1) > 0).sum())


@dataclass(frozen=True)
class StaticCheck:
    """A static model measured against its parent on the same sentences (:func:`check_against_parent`)."""

    sentences: int
    parent_per_s: float  # sentences per second, the parent
    static_per_s: float  # sentences per second, the static model
    mean_cosine: float  # mean cosine of the two models' vectors of the same sentence
    top1: float  # % of sentences whose static vector is nearest to the parent's vector of that sentence
    device: str


def check_against_parent(
    static: SentenceTransformer, parent: SentenceTransformer, texts: Sequence[str]
) -> StaticCheck:
    """Encode ``texts`` with both models (output space as saved), timing each; how close the static
    vectors come to the parent's (mean cosine, and how often the parent's vector of the same sentence
    is the nearest of all the parent's vectors: top-1 %)."""
    import time

    def timed(model: SentenceTransformer, batch: int) -> tuple[np.ndarray, float]:
        start = time.perf_counter()
        vecs = model.encode(list(texts), batch_size=batch, convert_to_numpy=True, normalize_embeddings=True)
        return vecs.astype(np.float32), len(texts) / max(time.perf_counter() - start, 1e-9)

    p_vecs, p_rate = timed(parent, 64)
    s_vecs, s_rate = timed(static, 1024)
    sims = s_vecs @ p_vecs.T
    top1 = float(np.mean(sims.argmax(axis=1) == np.arange(len(texts))) * 100)
    return StaticCheck(len(texts), p_rate, s_rate, float(np.mean(np.diag(sims))), top1, str(parent.device))


def static_card(
    parent_name: str,
    static: SentenceTransformer,
    *,
    weighting: str,
    vocab_files: Sequence[str] = (),
    fit_sentences: int = 0,
    check: StaticCheck | None = None,
    base_model: str | None = None,
    model_id: str = "PATH/TO/THIS/FOLDER",
) -> str:
    """The README.md of a static model: its parent, how many token vectors it holds, what it was
    measured at against the parent and why it is not a drop-in for it (sentence-transformers' own
    card for a ``StaticEmbedding`` model says none of this)."""
    n, table = distilled_tokens(static), static[0].embedding.weight.shape[0]
    dims = static.get_embedding_dimension()
    meta = ["---", "library_name: sentence-transformers", "pipeline_tag: sentence-similarity", "tags:"]
    meta += [f"- {t}" for t in ("sentence-transformers", "static-embeddings", "babelspace")]
    if base_model:
        meta.append(f"base_model: {base_model}")
    vocab = (
        f"the tokens of {', '.join(f'`{f}`' for f in vocab_files)}"
        if vocab_files
        else "every token of the parent's vocabulary"
    )
    left_out = (
        f"; the other {table - n:,} of the tokenizer's {table:,} entries are zero vectors"
        if n < table
        else ""
    )
    fit = (
        f"a linear map fitted on {fit_sentences:,} of those sentences brings the mean onto the parent's "
        "pooled vectors, and "
        if fit_sentences
        else ""
    )
    lines = [
        *meta,
        "---",
        "",
        f"# Static student of {parent_name}",
        "",
        f"A static model distilled from **{parent_name}** with `babelspace export --static`: **{n:,} token "
        f"vectors** of {dims} dimensions, one for each of {vocab}, each the parent's own output for that "
        f"token alone{left_out}. A sentence is the {weighting}-weighted mean of its tokens' vectors; "
        f"{fit}the parent's modules after its pooling follow, so the vectors live in the parent's output "
        "space.",
        "",
        "**Not a drop-in for its parent.** There is no attention: word order, negation and context are "
        "lost, a token outside the distilled vocabulary counts for nothing, and the input has no length "
        "limit only because nothing looks at position. Use it as a fast first pass (candidate generation "
        "for `babelspace mine` or `score`) and re-score the candidates with the parent; compare its "
        "vectors with the parent's by cosine only.",
        "",
        "## Measured against the parent",
        "",
    ]
    if check is None:
        lines.append(
            "Not measured at export: no `--static-vocab-from` sentence was left outside the linear "
            "map's fit to measure on. `bench/static_student.py` in the babelspace repository measures "
            "retrieval and speed."
        )
    else:
        ratio = check.static_per_s / check.parent_per_s
        lines += [
            f"On {check.sentences:,} sentences of the vocabulary files that the map was not fitted on, "
            f"encoded on {check.device} at export time (cosine of unit vectors):",
            "",
            "| | sentences/s | mean cosine to the parent's vector of the same sentence "
            "| the parent's vector of the same sentence is the nearest (%) |",
            "|---|---|---|---|",
            f"| parent ({parent_name}) | {check.parent_per_s:,.0f} | 1.000 | 100.0 |",
            f"| this static model | {check.static_per_s:,.0f} ({ratio:,.0f}× the parent) "
            f"| {check.mean_cosine:.3f} | {check.top1:.1f} |",
        ]
    lines += [
        "",
        "## Usage",
        "",
        "```python",
        "from sentence_transformers import SentenceTransformer",
        "",
        f'model = SentenceTransformer("{model_id}")',
        'vectors = model.encode(["The weather is lovely today.", "Das Wetter ist heute herrlich."])',
        "```",
        "",
    ]
    return "\n".join(lines)
