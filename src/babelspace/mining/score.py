"""``babelspace score``: score every pair of an existing bitext by margin, filter it, write what is kept.

1. Read the bitext with the corpus readers (:func:`babelspace.data.readers.load_parallel`: a TSV,
   ``babelspace mine`` output, ``aligned:SRC_FILE+TGT_FILE`` line-aligned files, a JSON Lines, CSV or
   Parquet file, a saved dataset or ``bible``).
   Rows longer than ``max_chars`` characters on either side are dropped and counted (``too_long``).
2. The cheap filters that are switched on (:mod:`babelspace.mining.filters`) flag rows.
3. The distinct sentences of each side (and of the ``--background`` files) are encoded into shards
   under the work directory, resumable exactly as ``babelspace mine``'s are.
4. Each source is searched against the targets (the bitext's targets plus the background targets),
   each target against the sources, shard by shard within ``--max-memory``
   (:func:`babelspace.mining.search.sharded_knn`); row ``i`` scores
   ``margin(cos(x_i, y_i), mean_k cos(x_i, NN_k(x_i)), mean_k cos(y_i, NN_k(y_i)))`` with the same
   :func:`babelspace.retrieval.knn.margin_score` and neighbourhood floor as mining.
5. The threshold: a number as given, or ``auto``
   (:func:`babelspace.mining.calibration.null_threshold`: the loosest threshold whose estimated
   precision against the scores of shuffled rows reaches the target).
6. ``OUT`` gets the kept rows as ``score<TAB>src<TAB>tgt`` (``babelspace mine``'s layout, so ``train
   --data OUT`` reads it), ``OUT.scores.tsv`` every row's origin, score and verdict, and
   ``OUT.summary.json`` the counts (per filter) and the language pair.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from babelspace.data.pairs import ParallelCorpus
from babelspace.errors import BabelspaceError, CorpusFormatError
from babelspace.mining.calibration import NullCalibration, null_threshold
from babelspace.mining.core import MiningConfig, peak_rss_bytes, plan_mining
from babelspace.mining.corpus import DEFAULT_MAX_CHARS, fingerprint, read_sentences
from babelspace.mining.encode import EncodeOptions, encode_to_shards
from babelspace.mining.filters import FilterOptions, apply_filters
from babelspace.mining.guards import check_output_paths, clip_k, model_identity
from babelspace.mining.pipeline import summary_path
from babelspace.mining.search import sharded_knn
from babelspace.mining.shards import Matrix, ShardStore, StackedMatrix
from babelspace.retrieval.knn import margin_score, neighbourhood_mean
from babelspace.writable import atomic_open

__all__ = ["ScoreInputs", "score_bitext", "scores_path"]

logger = logging.getLogger(__name__)

#: Rows whose cosine is computed at a time.
COSINE_BLOCK = 8192


def scores_path(out: str | Path) -> Path:
    """``KEPT.tsv`` -> ``KEPT.scores.tsv`` (every row's score and verdict)."""
    out = Path(out)
    return out.with_name(out.stem + ".scores.tsv")


@dataclass
class ScoreInputs:
    """What ``babelspace score`` reads: the bitext spec, its languages, and background files."""

    bitext: str
    src_lang: str | None = None
    tgt_lang: str | None = None
    background_src: list[Path] = field(default_factory=list)
    background_tgt: list[Path] = field(default_factory=list)
    max_chars: int = DEFAULT_MAX_CHARS
    skip_bad_lines: bool = False


def _read(inputs: ScoreInputs) -> tuple[ParallelCorpus, list[bool]]:
    """The bitext's rows, and per row whether a side is longer than ``max_chars``."""
    from babelspace.data.readers import load_parallel

    corpus = load_parallel(
        inputs.bitext,
        src_lang=inputs.src_lang,
        tgt_lang=inputs.tgt_lang,
        skip_bad_lines=inputs.skip_bad_lines,
        langs=[inputs.tgt_lang] if inputs.bitext == "bible" and inputs.tgt_lang else None,
        split="test",
    )
    if not corpus.pairs:
        raise CorpusFormatError(inputs.bitext, None, f"no pair to score ({corpus.report.summary()})")
    too_long = [max(len(p.src), len(p.tgt)) > inputs.max_chars for p in corpus.pairs]
    return corpus, too_long


def _index(texts: list[str]) -> tuple[list[str], np.ndarray]:
    """Distinct texts (first-seen order) and each row's index into them."""
    where: dict[str, int] = {}
    ids = np.fromiter((where.setdefault(t, len(where)) for t in texts), dtype=np.int64, count=len(texts))
    return list(where), ids


def _background(paths: list[Path], inputs: ScoreInputs) -> list[str]:
    texts: list[str] = []
    for path in paths:
        texts += read_sentences(
            path, ids=False, max_chars=inputs.max_chars, skip_bad_lines=inputs.skip_bad_lines
        ).texts
    return list(dict.fromkeys(texts))


def _stores(
    model: str, enc: EncodeOptions, workdir: Path, sides: dict[str, list[str]]
) -> tuple[dict[str, ShardStore], dict[str, Any]]:
    """Encode (or resume) every side into ``workdir/<side>``; the model is loaded only when needed."""
    identity = model_identity(model, enc.backend, enc.quantize)
    loaded = None
    stores, report = {}, {}
    for side, texts in sides.items():
        store = ShardStore(workdir / side)
        m = store.read_manifest()
        ready = m is not None and (m.model, m.n, m.fingerprint) == (identity, len(texts), fingerprint(texts))
        if enc.executor == "local" and loaded is None and not (ready and not store.missing_shards()):
            from babelspace.models.backends import load_backend_encoder

            loaded = load_backend_encoder(
                model, enc.backend, enc.quantize, device=enc.device, max_seq_length=enc.max_seq_length
            )
        report[side] = encode_to_shards(
            texts,
            store,
            model,
            fingerprint(texts),
            enc,
            model=loaded,
            desc=f"encode {side}",
            identity=identity,
        )
        stores[side] = store
    return stores, report


def _row_cosines(src: Matrix, tgt: Matrix, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    out = np.empty(len(a), dtype=np.float32)
    for s in range(0, len(a), COSINE_BLOCK):
        x, y = src.take(a[s : s + COSINE_BLOCK]), tgt.take(b[s : s + COSINE_BLOCK])
        out[s : s + len(x)] = np.einsum("nd,nd->n", x, y)
    return out


def _neighbourhoods(
    src: Matrix, tgt: Matrix, src_db: Matrix, tgt_db: Matrix, config: MiningConfig
) -> tuple[np.ndarray, np.ndarray, int]:
    """Mean similarity of every source to its k nearest targets (of ``tgt_db``) and of every target to
    its k nearest sources (of ``src_db``), floored as in mining; and the k used."""
    k = clip_k(config.k, len(src_db), len(tgt_db))
    plans = plan_mining(max(len(src), len(src_db)), max(len(tgt), len(tgt_db)), src.dim, config, k)
    opts = config.search_options()
    fs, fi = sharded_knn(src, tgt_db, k, plans["forward"], opts, desc="search src->tgt")
    bs, bi = sharded_knn(tgt, src_db, k, plans["backward"], opts, desc="search tgt->src")
    return neighbourhood_mean(fs, fi, config.k), neighbourhood_mean(bs, bi, config.k), k


def _derangement(n: int, seed: int) -> np.ndarray:
    """A random permutation of ``range(n)`` without fixed points (n >= 2)."""
    perm = np.random.default_rng(seed).permutation(n)
    for i in np.nonzero(perm == np.arange(n))[0]:
        j = (i + 1) % n
        perm[i], perm[j] = perm[j], perm[i]
    return perm


def score_bitext(
    inputs: ScoreInputs,
    out: str | Path,
    model: str,
    config: MiningConfig | None = None,
    enc: EncodeOptions | None = None,
    filters: FilterOptions | None = None,
    *,
    workdir: str | Path | None = None,
) -> dict[str, Any]:
    """The ``babelspace score`` pipeline (module docstring). Returns the summary (also written)."""
    config, enc, filters = config or MiningConfig(), enc or EncodeOptions(), filters or FilterOptions()
    out = Path(out)
    workdir = Path(workdir) if workdir is not None else out.with_name(out.stem + ".work")
    check_output_paths(out, workdir)
    t0 = time.perf_counter()
    corpus, too_long = _read(inputs)
    pairs = corpus.pairs
    src_texts, src_ids = _index([p.src for p in pairs])
    tgt_texts, tgt_ids = _index([p.tgt for p in pairs])
    report = apply_filters(
        [p.src for p in pairs],
        [p.tgt for p in pairs],
        [p.src_lang for p in pairs],
        [p.tgt_lang for p in pairs],
        filters,
    )
    sides = {"src": src_texts, "tgt": tgt_texts}
    if inputs.background_src:
        sides["bg-src"] = _background(inputs.background_src, inputs)
    if inputs.background_tgt:
        sides["bg-tgt"] = _background(inputs.background_tgt, inputs)
    stores, encoding = _stores(model, enc, workdir, sides)
    src_db = StackedMatrix([stores[s] for s in ("src", "bg-src") if s in stores])
    tgt_db = StackedMatrix([stores[s] for s in ("tgt", "bg-tgt") if s in stores])
    fwd, bwd, k = _neighbourhoods(stores["src"], stores["tgt"], src_db, tgt_db, config)
    cos = _row_cosines(stores["src"], stores["tgt"], src_ids, tgt_ids)
    scores = margin_score(cos, fwd[src_ids], bwd[tgt_ids], config.margin)
    candidate = np.array([r is None and not t for r, t in zip(report.reasons, too_long, strict=True)])
    threshold, calibration = _threshold(stores, src_ids, tgt_ids, fwd, bwd, scores, candidate, config)
    kept = candidate & (scores >= threshold)
    verdicts = [
        "too_long" if t else r if r is not None else "kept" if keep else "below_threshold"
        for r, t, keep in zip(report.reasons, too_long, kept.tolist(), strict=True)
    ]
    _write(out, corpus, scores, kept, verdicts)
    langs = sorted({(p.src_lang, p.tgt_lang) for p in pairs})
    summary = {
        "output": str(out),
        "scores": str(scores_path(out)),
        "bitext": inputs.bitext,
        "read": corpus.report.summary(),
        "rows": len(pairs),
        "src_lang": langs[0][0] if len(langs) == 1 else None,
        "tgt_lang": langs[0][1] if len(langs) == 1 else None,
        "model": model,
        "workdir": str(workdir),
        "encoding": encoding,
        "background": {"src": len(sides.get("bg-src", [])), "tgt": len(sides.get("bg-tgt", []))},
        "k": k,
        "margin": str(config.margin),
        "too_long": int(sum(too_long)),
        "filters": {"enabled": filters.enabled(), "flagged": report.flagged, "dropped": report.dropped},
        "threshold": threshold,
        "threshold_source": calibration.describe() if calibration else "given",
        "calibration": calibration.to_dict() if calibration else None,
        "below_threshold": verdicts.count("below_threshold"),
        "kept": int(kept.sum()),
        "time_s": round(time.perf_counter() - t0, 3),
        "peak_rss_bytes": peak_rss_bytes(),
    }
    summary_path(out).write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    logger.info("kept %d of %d rows -> %s", summary["kept"], len(pairs), out)
    return summary


def _threshold(
    stores: dict[str, ShardStore],
    src_ids: np.ndarray,
    tgt_ids: np.ndarray,
    fwd: np.ndarray,
    bwd: np.ndarray,
    scores: np.ndarray,
    candidate: np.ndarray,
    config: MiningConfig,
) -> tuple[float, NullCalibration | None]:
    """A given threshold, or the calibrated one against the scores of shuffled rows."""
    if config.threshold != "auto":
        return float(config.threshold), None  # type: ignore[arg-type]
    if len(src_ids) < 2:
        raise BabelspaceError("--threshold auto needs at least two rows; give --threshold T")
    perm = _derangement(len(src_ids), config.seed)
    null_cos = _row_cosines(stores["src"], stores["tgt"], src_ids, tgt_ids[perm])
    null = margin_score(null_cos, fwd[src_ids], bwd[tgt_ids[perm]], config.margin)
    null = null[src_ids != src_ids[perm]]  # a repeated sentence paired with itself is no unrelated row
    cal = null_threshold(scores[candidate], null, config.target_precision)
    return cal.threshold, cal


def _write(
    out: Path, corpus: ParallelCorpus, scores: np.ndarray, kept: np.ndarray, verdicts: list[str]
) -> None:
    """``out`` (kept rows, best first, ``babelspace mine``'s layout) and the per-row scores file."""
    out.parent.mkdir(parents=True, exist_ok=True)
    pairs = corpus.pairs
    order = [i for i in np.argsort(-scores, kind="stable").tolist() if kept[i]]
    with atomic_open(out) as fh:
        for i in order:
            fh.write(f"{scores[i]:.6f}\t{pairs[i].src}\t{pairs[i].tgt}\n")
    with atomic_open(scores_path(out)) as fh:
        for p, s, v in zip(pairs, scores.tolist(), verdicts, strict=True):
            fh.write(f"{p.origin}\t{s:.6f}\t{v}\n")
