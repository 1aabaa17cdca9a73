"""``babelspace score``: score every pair of an existing bitext by margin, filter it, write what is kept.

1. Read the bitext with the corpus readers (:func:`babelspace.data.readers.load_parallel`: a TSV,
   ``babelspace mine`` output, ``aligned:SRC_FILE+TGT_FILE`` line-aligned files, a JSON Lines, CSV or
   Parquet file, a saved dataset or ``bible``); a folder or ``bible`` is read at ``split`` (unset:
   the rule ``train --data`` follows: a folder's only split, else ``train``), and the summary says
   which. Each row keeps its languages. Rows longer than ``max_chars`` characters on either side are
   dropped and counted (``too_long``).
2. The cheap filters that are switched on (:mod:`babelspace.mining.filters`; duplicates and identical
   sides by default) flag rows.
3. The distinct sentences of each side (and of the ``--background`` files, less the bitext's own
   sentences of that side, so that a row's partner never fills two neighbour slots) are encoded into
   shards under the work directory, resumable exactly as ``babelspace mine``'s are.
4. Each source is searched against the targets (the bitext's targets plus the background targets),
   each target against the sources, shard by shard within ``--max-memory``
   (:func:`babelspace.mining.search.sharded_knn`); row ``i`` scores
   ``margin(cos(x_i, y_i), mean_k cos(x_i, NN_k(x_i)), mean_k cos(y_i, NN_k(y_i)))`` with the same
   :func:`babelspace.retrieval.knn.margin_score` and neighbourhood floor as mining.
5. The threshold: a number as given, or ``auto`` (:mod:`babelspace.mining.score_threshold`: where the
   densities of related rows and of the same rows shuffled cross, or the loosest threshold reaching
   ``target_precision``; estimated precision, recall and AUC in the summary). A rule that finds
   nothing to keep keeps nothing (``kept`` 0, ``reached`` false).
6. ``OUT`` gets the kept rows, best first, as
   ``score<TAB>src_id<TAB>tgt_id<TAB>src<TAB>tgt<TAB>src_lang<TAB>tgt_lang`` (ids: the row's origin;
   the 7-column layout of :mod:`babelspace.data.mined`, so ``train --data OUT`` reads every row with
   its own languages), ``OUT.scores.tsv`` every row's origin, score and verdict, and
   ``OUT.summary.json`` the counts (per filter), the language pairs and the threshold (strict JSON).
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from babelspace.data.mix import local_paths
from babelspace.data.pairs import ParallelCorpus, normalize_whitespace
from babelspace.errors import BabelspaceError, CorpusFormatError
from babelspace.mining.core import MiningConfig, peak_rss_bytes, plan_mining
from babelspace.mining.corpus import DEFAULT_MAX_CHARS, fingerprint, read_sentences
from babelspace.mining.encode import EncodeOptions, encode_to_shards
from babelspace.mining.filters import FilterOptions, apply_filters
from babelspace.mining.guards import check_output_paths, clip_k, shard_identity
from babelspace.mining.memory import parse_memory
from babelspace.mining.pipeline import summary_path
from babelspace.mining.score_threshold import ScoreThreshold, derangement, score_threshold
from babelspace.mining.search import sharded_knn
from babelspace.retrieval.knn import Margin, margin_score, neighbourhood_mean
from babelspace.vectors.shards import Matrix, ShardStore, StackedMatrix
from babelspace.writable import atomic_open, write_json

__all__ = ["NOTHING_KEPT", "ScoreConfig", "ScoreInputs", "score_bitext", "scores_path"]

logger = logging.getLogger(__name__)

#: Rows whose cosine is computed at a time.
COSINE_BLOCK = 8192
#: ``babelspace score``'s exit status when ``--threshold auto`` kept nothing (outputs are still written).
NOTHING_KEPT = 1


def scores_path(out: str | Path) -> Path:
    """``KEPT.tsv`` -> ``KEPT.scores.tsv`` (every row's score and verdict)."""
    out = Path(out)
    return out.with_name(out.stem + ".scores.tsv")


def _help(text: str) -> dict[str, str]:
    return {"help": text}


@dataclass
class ScoreConfig:
    """How ``babelspace score`` scores rows and where it cuts (validated at construction)."""

    k: int = field(default=4, metadata=_help("neighbourhood size of the margin"))
    margin: Margin = field(default=Margin.RATIO, metadata=_help("margin: ratio, distance or absolute"))
    threshold: float | str = field(
        default="auto",
        metadata=_help(
            "keep rows scoring >= T; 'auto': where the densities of related rows and of the same rows "
            "shuffled cross (or the loosest threshold reaching --target-precision)"
        ),
    )
    target_precision: float | None = field(
        default=None,
        metadata=_help("with --threshold auto: the loosest threshold whose estimated precision reaches this"),
    )
    max_memory: int | str = field(default=4 * 1024**3, metadata=_help("search memory budget"))
    seed: int = field(default=0, metadata=_help("seed of the shuffled rows of --threshold auto"))
    show_progress: bool = field(default=False, metadata=_help("progress bars"))

    def __post_init__(self) -> None:
        self.margin = Margin(self.margin)
        if isinstance(self.max_memory, str):
            self.max_memory = parse_memory(self.max_memory)
        if self.k < 1:
            raise BabelspaceError(f"--k must be >= 1, not {self.k!r}")
        if isinstance(self.threshold, str):
            if self.threshold != "auto":
                raise BabelspaceError(f"--threshold must be a number or 'auto', not {self.threshold!r}")
        elif not math.isfinite(self.threshold):
            raise BabelspaceError(f"--threshold must be a finite number or 'auto', not {self.threshold!r}")
        else:
            self.threshold = float(self.threshold)
        if self.target_precision is not None and not 0 < self.target_precision < 1:
            raise BabelspaceError(
                f"--target-precision must be between 0 and 1 (exclusive), not {self.target_precision!r}"
            )
        if self.target_precision is not None and self.threshold != "auto":
            raise BabelspaceError("--target-precision applies to --threshold auto: give one or the other")

    def search(self) -> MiningConfig:
        """The neighbourhood search's settings (the threshold is not read from it)."""
        return MiningConfig(
            k=self.k,
            margin=self.margin,
            max_memory=self.max_memory,  # type: ignore[arg-type]
            show_progress=self.show_progress,
            seed=self.seed,
        )


@dataclass
class ScoreInputs:
    """What ``babelspace score`` reads: the bitext spec, its languages, its split, and background files."""

    bitext: str
    src_lang: str | None = None
    tgt_lang: str | None = None
    background_src: list[Path] = field(default_factory=list)
    background_tgt: list[Path] = field(default_factory=list)
    max_chars: int = DEFAULT_MAX_CHARS
    skip_bad_lines: bool = False
    split: str | None = None  # a folder's or the Bible's split; unset: as `train --data` reads it


def _split_read(spec: str, split: str | None) -> str | None:
    """The split ``load_parallel`` reads of ``spec`` (None: the input has no splits)."""
    from babelspace.data.data_files import folder_split
    from babelspace.data.dataset_rows import load_dataset_split
    from babelspace.data.formats import corpus_format
    from babelspace.data.sources import is_source

    if spec == "bible" or is_source(spec):
        return split or "train"
    path = Path(spec)
    if not path.is_dir():
        return None
    if corpus_format(path) == "dataset":
        return load_dataset_split(path, split, flag="--split ")[1]
    return folder_split(path, split)


def _read(inputs: ScoreInputs) -> tuple[ParallelCorpus, list[bool], str | None]:
    """The bitext's rows, per row whether a side is longer than ``max_chars``, and the split read."""
    from babelspace.data.readers import load_parallel

    split = _split_read(inputs.bitext, inputs.split)
    if inputs.split is not None and split is None:
        logger.warning("%s has no splits: --split %s is not used", inputs.bitext, inputs.split)
    corpus = load_parallel(
        inputs.bitext,
        src_lang=inputs.src_lang,
        tgt_lang=inputs.tgt_lang,
        skip_bad_lines=inputs.skip_bad_lines,
        langs=[inputs.tgt_lang] if inputs.bitext == "bible" and inputs.tgt_lang else None,
        split=split or "train",
    )
    if split is not None:
        logger.info("%s: scoring its %r split (%d rows)", inputs.bitext, split, len(corpus))
    if not corpus.pairs:
        raise CorpusFormatError(inputs.bitext, None, f"no pair to score ({corpus.report.summary()})")
    too_long = [max(len(p.src), len(p.tgt)) > inputs.max_chars for p in corpus.pairs]
    return corpus, too_long, split


def _index(texts: list[str]) -> tuple[list[str], np.ndarray]:
    """Distinct texts (first-seen order) and each row's index into them."""
    where: dict[str, int] = {}
    ids = np.fromiter((where.setdefault(t, len(where)) for t in texts), dtype=np.int64, count=len(texts))
    return list(where), ids


def _background(paths: list[Path], inputs: ScoreInputs, own: list[str]) -> tuple[list[str], int]:
    """The distinct background sentences that are not among ``own`` (the bitext's sentences of that side,
    compared after whitespace normalisation), and how many were dropped as such."""
    texts: list[str] = []
    for path in paths:
        texts += read_sentences(
            path, ids=False, max_chars=inputs.max_chars, skip_bad_lines=inputs.skip_bad_lines
        ).texts
    mine = {normalize_whitespace(t) for t in own}
    distinct = dict.fromkeys(normalize_whitespace(t) for t in texts)
    kept = [t for t in distinct if t not in mine]
    return kept, len(distinct) - len(kept)


def _stores(
    model: str, enc: EncodeOptions, workdir: Path, sides: dict[str, list[str]]
) -> tuple[dict[str, ShardStore], dict[str, Any]]:
    """Encode (or resume) every side into ``workdir/<side>``; the model is loaded only when needed."""
    identity = shard_identity(model, enc.backend, enc.quantize)
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


def score_bitext(
    inputs: ScoreInputs,
    out: str | Path,
    model: str,
    config: ScoreConfig | None = None,
    enc: EncodeOptions | None = None,
    filters: FilterOptions | None = None,
    *,
    workdir: str | Path | None = None,
) -> dict[str, Any]:
    """The ``babelspace score`` pipeline (module docstring). Returns the summary (also written)."""
    config, enc, filters = config or ScoreConfig(), enc or EncodeOptions(), filters or FilterOptions()
    search = config.search()
    out = Path(out)
    workdir = Path(workdir) if workdir is not None else out.with_name(out.stem + ".work")
    check_output_paths(
        out,
        workdir,
        side_files=[("--out's scores", scores_path(out)), ("--out's summary", summary_path(out))],
        inputs=[
            *[("BITEXT", str(p)) for p in local_paths([inputs.bitext])],
            *(("--background-src", p) for p in inputs.background_src),
            *(("--background-tgt", p) for p in inputs.background_tgt),
        ],
        models=[("--model", model)],
    )
    t0 = time.perf_counter()
    corpus, too_long, split = _read(inputs)
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
    in_bitext = {"src": 0, "tgt": 0}
    for side, paths in (("src", inputs.background_src), ("tgt", inputs.background_tgt)):
        if paths:
            sides[f"bg-{side}"], in_bitext[side] = _background(paths, inputs, sides[side])
    stores, encoding = _stores(model, enc, workdir, sides)
    src_db = StackedMatrix([stores[s] for s in ("src", "bg-src") if s in stores])
    tgt_db = StackedMatrix([stores[s] for s in ("tgt", "bg-tgt") if s in stores])
    fwd, bwd, k = _neighbourhoods(stores["src"], stores["tgt"], src_db, tgt_db, search)
    cos = _row_cosines(stores["src"], stores["tgt"], src_ids, tgt_ids)
    scores = margin_score(cos, fwd[src_ids], bwd[tgt_ids], search.margin)
    candidate = np.array([r is None and not t for r, t in zip(report.reasons, too_long, strict=True)])
    threshold, auto = _threshold(stores, src_ids, tgt_ids, fwd, bwd, scores, candidate, config)
    kept = candidate & (scores >= threshold) if threshold is not None else np.zeros(len(pairs), dtype=bool)
    verdicts = [
        "too_long" if t else r if r is not None else "kept" if keep else "below_threshold"
        for r, t, keep in zip(report.reasons, too_long, kept.tolist(), strict=True)
    ]
    _write(out, corpus, scores, kept, verdicts)
    lang_pairs = corpus.lang_pairs()
    kept_pairs: dict[tuple[str, str], int] = {}
    for i in np.flatnonzero(kept).tolist():
        key = (pairs[i].src_lang, pairs[i].tgt_lang)
        kept_pairs[key] = kept_pairs.get(key, 0) + 1
    one = next(iter(lang_pairs)) if len(lang_pairs) == 1 else (None, None)
    summary = {
        "output": str(out),
        "scores": str(scores_path(out)),
        "bitext": inputs.bitext,
        "split": split,
        "read": corpus.report.summary(),
        "rows": len(pairs),
        "columns": "score, src_id, tgt_id, src, tgt, src_lang, tgt_lang",
        "src_lang": one[0],
        "tgt_lang": one[1],
        "lang_pairs": {f"{sl}-{tl}": n for (sl, tl), n in lang_pairs.items()},
        "kept_lang_pairs": {f"{sl}-{tl}": n for (sl, tl), n in sorted(kept_pairs.items())},
        "model": model,
        "workdir": str(workdir),
        "encoding": encoding,
        "background": {
            "src": len(sides.get("bg-src", [])),
            "tgt": len(sides.get("bg-tgt", [])),
            "dropped_as_in_bitext": in_bitext,
        },
        "k": k,
        "margin": str(search.margin),
        "too_long": int(sum(too_long)),
        "filters": {"enabled": filters.enabled(), "flagged": report.flagged, "dropped": report.dropped},
        "threshold": threshold,
        "threshold_source": auto.describe() if auto else "given",
        "reached": auto.reached if auto else True,
        "precision": auto.precision if auto else None,
        "recall": auto.recall if auto else None,
        "auc": auto.auc if auto else None,
        "separation": (auto.separation_note() or "separates") if auto and auto.auc is not None else None,
        "auto": auto.to_dict() if auto else None,
        "below_threshold": verdicts.count("below_threshold"),
        "kept": int(kept.sum()),
        "time_s": round(time.perf_counter() - t0, 3),
        "peak_rss_bytes": peak_rss_bytes(),
    }
    write_json(summary_path(out), summary)
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
    config: ScoreConfig,
) -> tuple[float | None, ScoreThreshold | None]:
    """A given threshold, or ``auto``'s against the candidate rows shuffled by a derangement (None:
    nothing is kept)."""
    if config.threshold != "auto":
        return float(config.threshold), None
    rows = np.flatnonzero(candidate)
    if len(rows) < 2:
        raise BabelspaceError(
            f"--threshold auto needs at least two rows that pass the filters ({len(rows)} do); give --threshold T"
        )
    a, b = src_ids[rows], tgt_ids[rows]
    perm = derangement(len(rows), config.seed)
    null_cos = _row_cosines(stores["src"], stores["tgt"], a, b[perm])
    null = margin_score(null_cos, fwd[a], bwd[b[perm]], config.margin)
    # a repeated sentence paired with itself is no unrelated row
    null = null[(a != a[perm]) & (b != b[perm])]
    auto = score_threshold(scores[rows], null, config.target_precision)
    return auto.threshold, auto


def _write(
    out: Path, corpus: ParallelCorpus, scores: np.ndarray, kept: np.ndarray, verdicts: list[str]
) -> None:
    """``out`` (kept rows, best first, in the 7-column layout of :mod:`babelspace.data.mined`) and the
    per-row scores file."""
    out.parent.mkdir(parents=True, exist_ok=True)
    pairs = corpus.pairs
    order = [i for i in np.argsort(-scores, kind="stable").tolist() if kept[i]]
    with atomic_open(out) as fh:
        for i in order:
            p = pairs[i]
            origin = " ".join(p.origin.split())
            fh.write(f"{scores[i]:.6f}\t{origin}\t{origin}\t{p.src}\t{p.tgt}\t{p.src_lang}\t{p.tgt_lang}\n")
    with atomic_open(scores_path(out)) as fh:
        for p, s, v in zip(pairs, scores.tolist(), verdicts, strict=True):
            fh.write(f"{p.origin}\t{s:.6f}\t{v}\n")
