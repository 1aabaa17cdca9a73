"""``babelspace align``: the sentences of parallel documents aligned, many document pairs per call.

:func:`align_texts` aligns document pairs held in memory (lists of sentences); :func:`align_files`
reads document pairs (:mod:`babelspace.mining.align_docs`), aligns them group by group and writes
every block with both sides as ``babelspace mine`` output with ids,

    score<TAB>src_id<TAB>tgt_id<TAB>src<TAB>tgt

where an id is ``PATH:LINES`` (the document as given and the block's first and last file lines,
1-based, e.g. ``en/mark.txt:12-13``) and a side of several sentences is joined by a space; and a summary
``OUT.summary.json`` with ``src_lang``/``tgt_lang``, so that ``babelspace train --data OUT.tsv`` reads
the pairs (``--min-score`` keeps blocks scoring at least that). 1-0 and 0-1 blocks are counted in the
summary, not written.

The score: ``1 - cost / (a * b)`` for ``--method embeddings`` (:func:`block_scores`: 1 for a copy, 0
for sides no closer than each is to the other document in general; correct translations score well
below 1, docs/alignment.md), ``P(|delta|)`` for ``gale-church``.

Bad input: a document pair whose two sides have no sentence, or one side none, is skipped and counted
(``documents.skipped``); a line that is not UTF-8 is an error naming file and line unless
``skip_bad_lines``; a text (a sentence or a concatenation the search considers) longer than the model's
window is encoded from its first ``max_seq_length`` tokens, as every sentence-transformers encoder
does, and counted in ``truncated``.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from babelspace.mining.align_cost import block_scores, embedding_alignment, overlap_texts, overlap_vectors
from babelspace.mining.align_docs import Document, DocumentPair, read_document
from babelspace.mining.align_dp import AlignConfig, AlignError, Block, block_type
from babelspace.mining.encode import EncodeOptions
from babelspace.mining.gale_church import gale_church_alignment, length_scores
from babelspace.writable import atomic_open, check_output, write_json

__all__ = ["DocumentAlignment", "align_files", "align_texts", "alignment_summary_path", "embed_documents"]

logger = logging.getLogger(__name__)

#: Sentences (both sides) read before a group of document pairs is encoded and aligned.
GROUP_SENTENCES = 20000
#: Characters of one text handed to the tokenizer (any longer text is far past every model's window).
MAX_TEXT_CHARS = 20000
_EMPTY, _ONE_SIDE = "both sides empty", "one side empty"


@dataclass
class DocumentAlignment:
    """The blocks of one document pair in order, and the score of each block with both sides."""

    blocks: list[Block]
    scores: list[float]


def alignment_summary_path(out: str | Path) -> Path:
    """``PAIRS.tsv`` -> ``PAIRS.summary.json`` (where ``babelspace train`` looks for the languages)."""
    out = Path(out)
    return out.with_name(out.stem + ".summary.json")


# ----------------------------------------------------------------------------- encoding
def _over_window(model: Any, texts: list[str]) -> np.ndarray:
    """Which of ``texts`` (prompt included) have more tokens than the model's window."""
    from babelspace.models.encoder import default_prompt

    tokenizer = getattr(model, "tokenizer", None)
    window = getattr(model, "max_seq_length", None)
    if tokenizer is None or not window:
        return np.zeros(len(texts), dtype=bool)
    prompt = default_prompt(model)
    out = np.zeros(len(texts), dtype=bool)
    step = 4096
    for s in range(0, len(texts), step):
        batch = [prompt + t for t in texts[s : s + step]]
        ids = tokenizer(batch, add_special_tokens=True, truncation=False, verbose=False)["input_ids"]
        out[s : s + step] = [len(x) > window for x in ids]
    return out


def _encode(model: Any, texts: list[str], opts: EncodeOptions) -> np.ndarray:
    from babelspace.models.encoder import encode
    from babelspace.progress import Progress

    step = max(1, opts.batch_size * 8)
    bar = Progress(total=len(texts), desc="encode", unit="text") if opts.show_progress else None
    parts = []
    try:
        for s in range(0, len(texts), step):
            parts.append(encode(model, texts[s : s + step], batch_size=opts.batch_size, show_progress=False))
            if bar is not None:
                bar.update(len(parts[-1]))
    finally:
        if bar is not None:
            bar.close()
    return np.concatenate(parts)


def embed_documents(
    pairs: Sequence[tuple[Sequence[str], Sequence[str]]],
    model: Any,
    max_overlap: int,
    opts: EncodeOptions,
    stats: Counter,
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Every pair's overlap vectors, from one encoding of the distinct texts of all pairs; ``stats``
    counts the distinct sentences / concatenations longer than the window and the encoding time."""
    t0 = time.perf_counter()
    layers = [[overlap_texts([t[:MAX_TEXT_CHARS] for t in side], max_overlap) for side in p] for p in pairs]
    singles = {t for p in layers for side in p for t in side[0]}
    unique = list(dict.fromkeys(t for p in layers for side in p for layer in side for t in layer))
    row_of = {t: i for i, t in enumerate(unique)}
    over = _over_window(model, unique)
    lines = sum(1 for t in singles if over[row_of[t]])
    stats.update(truncated_lines=lines, truncated_merges=int(over.sum()) - lines, texts=len(unique))
    emb = _encode(model, unique, opts)
    vectors = [
        (overlap_vectors(p[0], len(p[0][0]), row_of, emb), overlap_vectors(p[1], len(p[1][0]), row_of, emb))
        for p in layers
    ]
    stats["encode_s"] += time.perf_counter() - t0
    return vectors


def align_texts(
    pairs: Sequence[tuple[Sequence[str], Sequence[str]]],
    config: AlignConfig | None = None,
    model: Any = None,
    opts: EncodeOptions | None = None,
) -> tuple[list[DocumentAlignment], Counter]:
    """Align each (source sentences, target sentences) pair; every side must hold a sentence.

    ``model``: a loaded sentence-transformers encoder, or a name or folder to load
    (``method="embeddings"``). Returns the
    alignments and what was done: ``truncated_lines`` / ``truncated_merges`` (distinct texts longer
    than the window), ``texts`` (distinct texts encoded), ``encode_s`` and ``search_s`` (seconds)."""
    config = config or AlignConfig()
    opts = opts or EncodeOptions()
    stats: Counter = Counter()
    if any(not s or not t for s, t in pairs):
        raise AlignError("every document pair needs a sentence on both sides")
    if config.method == "gale-church":
        t0 = time.perf_counter()
        out = []
        for s, t in pairs:
            blocks, costs = gale_church_alignment([len(x) for x in s], [len(x) for x in t], config)
            out.append(DocumentAlignment(blocks, length_scores(blocks, costs)))
        stats["search_s"] += time.perf_counter() - t0
        return out, stats
    if model is None:
        raise ValueError("align_texts() with method='embeddings' needs a model; or use method='gale-church'")
    if isinstance(model, (str, Path)):  # a name or folder, not a loaded encoder (str has .encode too)
        from babelspace.models.backends import load_backend_encoder

        model = load_backend_encoder(
            str(model), opts.backend, opts.quantize, opts.device, opts.max_seq_length
        )
    vectors = embed_documents(pairs, model, config.max_size - 1, opts, stats)
    t0 = time.perf_counter()
    out = []
    for ov0, ov1 in vectors:
        blocks, costs = embedding_alignment(ov0, ov1, config)
        out.append(DocumentAlignment(blocks, block_scores(blocks, costs)))
    stats["search_s"] += time.perf_counter() - t0
    return out, stats


# ----------------------------------------------------------------------------- files
def _lines_id(doc: Document, idx: tuple[int, ...]) -> str:
    first, last = doc.numbers[idx[0]], doc.numbers[idx[-1]]
    return str(first) if first == last else f"{first}-{last}"


def _write_pair(fh: TextIO, src: Document, tgt: Document, result: DocumentAlignment) -> int:
    src_name, tgt_name = (" ".join(str(d.path).split()) for d in (src, tgt))
    scores = iter(result.scores)
    written = 0
    for s, t in result.blocks:
        if not s or not t:
            continue
        src_id, tgt_id = f"{src_name}:{_lines_id(src, s)}", f"{tgt_name}:{_lines_id(tgt, t)}"
        src_text = " ".join(src.lines[k] for k in s)
        tgt_text = " ".join(tgt.lines[k] for k in t)
        fh.write(f"{next(scores):.6f}\t{src_id}\t{tgt_id}\t{src_text}\t{tgt_text}\n")
        written += 1
    return written


class _Tally:
    """What the summary counts."""

    def __init__(self) -> None:
        self.skipped: Counter = Counter()
        self.skipped_documents: list[dict[str, str]] = []
        self.blocks: Counter = Counter()
        self.sentences: Counter = Counter()
        self.work: Counter = Counter()
        self.aligned = self.pairs = 0

    def read(self, pair: DocumentPair, src: Document, tgt: Document) -> bool:
        """Count a read pair; False when it is skipped (a side without sentences)."""
        for side, doc in (("src", src), ("tgt", tgt)):
            self.sentences[side] += len(doc)
            self.sentences[f"{side}_blank_lines"] += doc.blank
            self.sentences[f"{side}_bad_lines"] += doc.bad
        if src.lines and tgt.lines:
            return True
        reason = _EMPTY if not src.lines and not tgt.lines else _ONE_SIDE
        self.skipped[reason] += 1
        self.skipped_documents.append({"name": pair.name, "reason": reason})
        logger.warning("skipped %s / %s: %s", pair.src, pair.tgt, reason)
        return False


def _groups(
    pairs: Sequence[DocumentPair], tally: _Tally, skip_bad_lines: bool
) -> Iterator[list[tuple[DocumentPair, Document, Document]]]:
    group: list[tuple[DocumentPair, Document, Document]] = []
    size = 0
    for pair in pairs:
        src, tgt = read_document(pair.src, skip_bad_lines), read_document(pair.tgt, skip_bad_lines)
        if not tally.read(pair, src, tgt):
            continue
        group.append((pair, src, tgt))
        size += len(src) + len(tgt)
        if size >= GROUP_SENTENCES:
            yield group
            group, size = [], 0
    if group:
        yield group


def _align_groups(
    fh: TextIO,
    pairs: Sequence[DocumentPair],
    tally: _Tally,
    config: AlignConfig,
    model: Any,
    opts: EncodeOptions,
    skip_bad_lines: bool,
) -> None:
    for group in _groups(pairs, tally, skip_bad_lines):
        results, stats = align_texts([(s.lines, t.lines) for _, s, t in group], config, model, opts)
        tally.work.update(stats)
        for (_, src, tgt), result in zip(group, results, strict=True):
            tally.blocks.update(block_type(b) for b in result.blocks)
            tally.pairs += _write_pair(fh, src, tgt, result)
            tally.aligned += 1
        logger.info("aligned %d document pairs, %d sentence pairs so far", tally.aligned, tally.pairs)


def _load_model(model: Any, config: AlignConfig, opts: EncodeOptions) -> Any:
    if config.method != "embeddings":
        return None
    if model is None or model == "":
        raise AlignError("--method embeddings needs --model (or use --method gale-church)")
    if not isinstance(model, (str, Path)):
        return model  # already loaded (the Python API)
    from babelspace.models.backends import load_backend_encoder

    return load_backend_encoder(model, opts.backend, opts.quantize, opts.device, opts.max_seq_length)


def align_files(
    pairs: Sequence[DocumentPair],
    out: str | Path,
    model: Any = None,
    config: AlignConfig | None = None,
    opts: EncodeOptions | None = None,
    *,
    src_lang: str | None = None,
    tgt_lang: str | None = None,
    skip_bad_lines: bool = False,
) -> dict[str, Any]:
    """The ``babelspace align`` pipeline. Returns the summary (also written to
    :func:`alignment_summary_path`)."""
    config, opts, out = config or AlignConfig(), opts or EncodeOptions(), Path(out)
    if out.is_dir():
        raise AlignError(f"--out {out} is a folder; give a file name such as {out / 'aligned.tsv'}")
    inputs = list(dict.fromkeys(named for pair in pairs for named in pair.inputs()))
    models = [("--model", model)] if isinstance(model, (str, Path)) else []  # a loaded model reads no files
    for flag, path in (("--out", out), ("--out's summary", alignment_summary_path(out))):
        check_output(path, flag, inputs=inputs, models=models)
    t_start = time.perf_counter()
    loaded = _load_model(model, config, opts)
    load_s = time.perf_counter() - t_start
    window = getattr(loaded, "max_seq_length", None)
    tally = _Tally()
    out.parent.mkdir(parents=True, exist_ok=True)
    with atomic_open(out) as fh:  # no half-written output is left behind
        _align_groups(fh, pairs, tally, config, loaded, opts, skip_bad_lines)
    timings = {
        "load_model_s": load_s,
        "encode_s": tally.work["encode_s"],
        "search_s": tally.work["search_s"],
        "total_s": time.perf_counter() - t_start,
    }
    name = str(model) if isinstance(model, (str, Path)) or model is None else type(model).__name__
    summary = _summary(out, name, config, tally, timings, window, len(pairs), src_lang, tgt_lang)
    write_json(alignment_summary_path(out), summary)
    return summary


def _summary(
    out: Path,
    model: str | None,
    config: AlignConfig,
    tally: _Tally,
    timings: dict[str, float],
    window: int | None,
    n_pairs: int,
    src_lang: str | None,
    tgt_lang: str | None,
) -> dict[str, Any]:
    work = timings["encode_s"] + timings["search_s"]
    return {
        "output": str(out),
        "method": config.method,
        "model": model if config.method == "embeddings" else None,
        "src_lang": src_lang,
        "tgt_lang": tgt_lang,
        "settings": asdict(config),
        "documents": {"pairs": n_pairs, "aligned": tally.aligned, "skipped": dict(tally.skipped)},
        "skipped_documents": tally.skipped_documents,
        "sentences": dict(tally.sentences),
        "blocks": dict(sorted(tally.blocks.items())),
        "pairs": tally.pairs,
        "truncated": {
            "window_tokens": window,
            "lines": tally.work["truncated_lines"],
            "merges": tally.work["truncated_merges"],
        },
        "texts_encoded": tally.work["texts"],
        "timings_s": {k: round(v, 3) for k, v in timings.items()},
        # encoding and search only (loading the model and reading the files left out)
        "pairs_per_s": round(tally.pairs / work, 2) if work > 0 else None,
    }
