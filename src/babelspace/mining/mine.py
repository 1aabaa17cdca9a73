"""Margin-based bitext mining over corpora that need not fit in memory.

:func:`mine_embeddings` mines two embedding matrices (in memory or sharded on disk); :func:`mine_files`
is the whole ``babelspace mine`` pipeline: read and clean both files, encode them to shards in a work
directory (resumable), search, score, select, and write ``score<TAB>src<TAB>tgt`` plus a JSON summary.

Scoring is margin-based (Artetxe & Schwenk, ACL 2019, arXiv 1811.01136) with the shared
:func:`babelspace.evaluation.knn.margin_score`. The default threshold is ``"auto"``: calibrated on the
run's own sentences for a target precision (:mod:`babelspace.mining.calibration`).
:data:`DEFAULT_THRESHOLDS` are the fixed values LASER-style mining uses (ratio 1.06, the strict end of
WikiMatrix/CCMatrix's 1.04–1.06), for ``--threshold`` by hand.
"""

from __future__ import annotations

import json
import logging
import resource
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from babelspace.data.languages import is_valid_lang
from babelspace.errors import BabelspaceError
from babelspace.evaluation.knn import Backend, Margin
from babelspace.mining.corpus import DEFAULT_MAX_CHARS, SentenceFile, read_sentences
from babelspace.mining.encode import EncodeOptions, encode_to_shards
from babelspace.mining.guards import check_output_paths, clip_k, model_identity
from babelspace.mining.memory import ChunkPlan, mining_fixed_bytes, parse_memory, plan_search
from babelspace.mining.search import IndexKind, SearchOptions, index_fixed_bytes, index_row_bytes, sharded_knn
from babelspace.mining.selection import Candidates, Retrieval, greedy_one_to_one, margin_candidates
from babelspace.mining.shards import Matrix, ShardStore

if TYPE_CHECKING:
    import numpy as np

    from babelspace.mining.calibration import Calibration

__all__ = [
    "DEFAULT_THRESHOLDS",
    "MiningConfig",
    "MiningResult",
    "default_threshold",
    "mine_embeddings",
    "mine_files",
    "peak_rss_bytes",
    "summary_path",
]

logger = logging.getLogger(__name__)

#: Fixed score thresholds (not the default; ``--threshold auto`` is). Ratio: LASER's mining threshold
#: (1.04–1.06 in WikiMatrix and CCMatrix). Distance: cos − neighbourhood mean, a heuristic of similar
#: strictness for neighbourhoods around 0.6–0.7 cosine. Absolute: a plain cosine.
DEFAULT_THRESHOLDS = {Margin.RATIO: 1.06, Margin.DISTANCE: 0.04, Margin.ABSOLUTE: 0.8}


def default_threshold(margin: Margin | str) -> float:
    return DEFAULT_THRESHOLDS[Margin(margin)]


@dataclass
class MiningConfig:
    k: int = 4
    margin: Margin = Margin.RATIO
    retrieval: Retrieval = "max"
    # "auto" (or None): the lowest threshold whose estimated precision on this run reaches
    # target_precision (babelspace.mining.calibration); a number: kept as given
    threshold: float | str | None = "auto"
    target_precision: float = 0.9
    src_lang: str | None = None  # language pair: known pairs for the recall estimate, the summary
    tgt_lang: str | None = None
    index: IndexKind = "flat"
    nprobe: int = 16
    nlist: int | None = None
    pq_m: int | None = None
    max_memory: int = 4 * 1024**3
    backend: Backend = "faiss"
    show_progress: bool = False
    seed: int = 0

    def __post_init__(self) -> None:
        self.margin = Margin(self.margin)
        if isinstance(self.max_memory, str):
            self.max_memory = parse_memory(self.max_memory)
        if self.k < 1:
            raise ValueError(f"k must be >= 1, got {self.k}")
        if self.threshold is None:
            self.threshold = "auto"
        if isinstance(self.threshold, str) and self.threshold != "auto":
            raise BabelspaceError(f"--threshold must be a number or 'auto', not {self.threshold!r}")
        for flag, code in (("--src-lang", self.src_lang), ("--tgt-lang", self.tgt_lang)):
            if code is not None and not is_valid_lang(code):
                raise BabelspaceError(
                    f"{flag} {code!r} is not a language code (e.g. 'de', 'deu', 'zho_Hans')"
                )
        if not 0 < self.target_precision < 1:
            raise BabelspaceError(
                f"--target-precision must be between 0 and 1 (exclusive), not {self.target_precision!r}"
            )

    def search_options(self) -> SearchOptions:
        return SearchOptions(
            index=self.index,
            backend=self.backend,
            nlist=self.nlist,
            nprobe=self.nprobe,
            pq_m=self.pq_m,
            seed=self.seed,
            show_progress=self.show_progress,
        )


@dataclass
class MiningResult:
    """Accepted one-to-one pairs (best first), plus the counts and plans that produced them."""

    pairs: Candidates
    n_candidates: int
    n_one_to_one: int
    threshold: float
    plans: dict[str, ChunkPlan] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    k: int = 0  # neighbourhood size used (the requested k clipped to the corpus)
    calibration: Calibration | None = None  # how --threshold auto chose the threshold


def peak_rss_bytes(children: bool = False) -> int:
    """Peak resident memory of this process (or of its finished children), from getrusage."""
    who = resource.RUSAGE_CHILDREN if children else resource.RUSAGE_SELF
    return int(resource.getrusage(who).ru_maxrss) * 1024  # Linux reports KiB


def plan_mining(
    n_src: int, n_tgt: int, dim: int, config: MiningConfig, k: int | None = None
) -> dict[str, ChunkPlan]:
    """Chunk plans of the forward (src -> tgt) and backward (tgt -> src) searches."""
    opts = config.search_options()
    k = config.k if k is None else k
    fixed = mining_fixed_bytes(n_src, n_tgt, k)
    row_bytes = index_row_bytes(opts, dim)
    plans = {}
    for name, nq, ndb in (("forward", n_src, n_tgt), ("backward", n_tgt, n_src)):
        extra = index_fixed_bytes(opts, dim, ndb, config.max_memory)
        plans[name] = plan_search(
            nq,
            ndb,
            dim,
            k,
            config.max_memory,
            fixed_bytes=fixed + extra,
            index=config.index,
            index_row_bytes=row_bytes,
            backend=config.backend,
        )
    return plans


def mine_embeddings(
    src: Matrix,
    tgt: Matrix,
    config: MiningConfig | None = None,
    gold: tuple[np.ndarray, np.ndarray] | None = None,
) -> MiningResult:
    """Mine one-to-one pairs between two L2-normalised embedding matrices (see the module docstring).

    With ``threshold="auto"`` the threshold is calibrated on these matrices
    (:func:`babelspace.mining.calibration.calibrate`); ``gold``: vectors of known pairs (row i of each)
    planted into its decoys to estimate recall.
    """
    config = config or MiningConfig()
    if src.dim != tgt.dim:
        raise ValueError(f"dimension mismatch: source {src.dim}, target {tgt.dim}")
    k = clip_k(config.k, len(src), len(tgt))
    plans = plan_mining(len(src), len(tgt), src.dim, config, k)
    for name, p in plans.items():
        logger.info(
            "%s search: %d database rows x %d query rows per block (%.0f MiB of %.0f MiB budget)",
            name,
            p.db_rows,
            p.query_rows,
            p.total_bytes / 2**20,
            p.budget_bytes / 2**20,
        )
    opts = config.search_options()
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    fwd_sims, fwd_ids = sharded_knn(src, tgt, k, plans["forward"], opts, desc="search src->tgt")
    bwd_sims, bwd_ids = sharded_knn(tgt, src, k, plans["backward"], opts, desc="search tgt->src")
    timings["search_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    lists = (fwd_sims, fwd_ids, bwd_sims, bwd_ids)
    cands = margin_candidates(*lists, config.margin, config.retrieval, k=config.k)
    auto = config.threshold == "auto"
    mutual = margin_candidates(*lists, config.margin, "intersect", k=config.k) if auto else None
    del fwd_sims, fwd_ids, bwd_sims, bwd_ids, lists
    one = cands.subset(greedy_one_to_one(cands.src, cands.tgt, cands.scores))
    timings["select_s"] = time.perf_counter() - t0
    calibration = None
    if mutual is not None:
        from babelspace.mining.calibration import calibrate

        t0 = time.perf_counter()
        calibration = calibrate(src, tgt, one, mutual, config, gold)
        timings["calibrate_s"] = time.perf_counter() - t0
        threshold = calibration.threshold
    else:
        threshold = float(config.threshold)  # type: ignore[arg-type]
    accepted = one.subset(one.scores >= threshold)
    return MiningResult(accepted, len(cands), len(one), threshold, plans, timings, k, calibration)


# ----------------------------------------------------------------------------- files


def summary_path(out: str | Path) -> Path:
    """``PAIRS.tsv`` -> ``PAIRS.summary.json`` (next to the output)."""
    out = Path(out)
    return out.with_name(out.stem + ".summary.json")


def _write_pairs(out: Path, result: MiningResult, src: SentenceFile, tgt: SentenceFile) -> None:
    with_ids = src.has_ids or tgt.has_ids
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    p = result.pairs
    with open(tmp, "w", encoding="utf-8") as fh:
        for s, t, score in zip(p.src.tolist(), p.tgt.tolist(), p.scores.tolist(), strict=True):
            if with_ids:
                fh.write(f"{score:.6f}\t{src.id_of(s)}\t{tgt.id_of(t)}\t{src.texts[s]}\t{tgt.texts[t]}\n")
            else:
                fh.write(f"{score:.6f}\t{src.texts[s]}\t{tgt.texts[t]}\n")
    tmp.replace(out)


def mine_files(
    src_path: str | Path,
    tgt_path: str | Path,
    out: str | Path,
    model: str,
    config: MiningConfig | None = None,
    encode_options: EncodeOptions | None = None,
    *,
    workdir: str | Path | None = None,
    ids: bool | None = None,
    max_chars: int = DEFAULT_MAX_CHARS,
    skip_bad_lines: bool = False,
) -> dict[str, Any]:
    """The ``babelspace mine`` pipeline. Returns the summary (also written to :func:`summary_path`).

    Embeddings go to ``workdir/src`` and ``workdir/tgt`` (default: ``OUT.work`` next to the output);
    rerunning the same command reuses every finished shard.
    """
    config = config or MiningConfig()
    enc = encode_options or EncodeOptions()
    out = Path(out)
    workdir = Path(workdir) if workdir is not None else out.with_name(out.stem + ".work")
    check_output_paths(out, workdir)
    t_start = time.perf_counter()
    timings: dict[str, float] = {}

    with _timed(timings, "read_s"):
        src = read_sentences(src_path, ids=ids, max_chars=max_chars, skip_bad_lines=skip_bad_lines)
        tgt = read_sentences(tgt_path, ids=ids, max_chars=max_chars, skip_bad_lines=skip_bad_lines)
    with _timed(timings, "encode_s"):
        identity = model_identity(model, enc.backend, enc.quantize)
        loaded = _encoder_if_needed(model, identity, enc, config, workdir, src, tgt)
        stores, encoding = _encode_sides(model, identity, enc, workdir, src, tgt, loaded)
    gold = _gold_vectors(config, loaded, enc, timings)
    del loaded  # the encoder's memory is free before the search

    result = mine_embeddings(stores["src"], stores["tgt"], config, gold)
    timings.update(result.timings)
    from babelspace.mining.threshold import warn_if_tiny_share

    if result.calibration is None:
        kept_share = warn_if_tiny_share(len(result.pairs), result.n_one_to_one, result.threshold)
    else:  # a small share is what a precise threshold keeps from mostly unrelated text
        kept_share = len(result.pairs) / result.n_one_to_one if result.n_one_to_one else 0.0
    with _timed(timings, "write_s"):
        _write_pairs(out, result, src, tgt)
    timings["total_s"] = time.perf_counter() - t_start

    summary = {
        "output": str(out),
        "src": {"path": str(src_path), "ids": src.has_ids, **src.stats.to_dict()},
        "tgt": {"path": str(tgt_path), "ids": tgt.has_ids, **tgt.stats.to_dict()},
        **_encoding_summary(model, identity, enc, workdir, stores, encoding),
        **_selection_summary(config, result, kept_share),
        "timings_s": {k: round(v, 3) for k, v in timings.items()},
        "peak_rss_bytes": peak_rss_bytes(),
        "peak_rss_children_bytes": peak_rss_bytes(children=True),
    }
    path = summary_path(out)
    path.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    logger.info("mined %d pairs -> %s (summary %s)", len(result.pairs), out, path)
    return summary


@contextmanager
def _timed(timings: dict[str, float], key: str) -> Iterator[None]:
    """Record the block's wall time as ``timings[key]`` (seconds; not recorded if the block raises)."""
    t0 = time.perf_counter()
    yield
    timings[key] = time.perf_counter() - t0


def _encoder_if_needed(
    model: str,
    identity: str,
    enc: EncodeOptions,
    config: MiningConfig,
    workdir: Path,
    src: SentenceFile,
    tgt: SentenceFile,
) -> Any:
    """The loaded encoder, or None when nothing needs it in this process.

    The local executor needs it unless both shard stores are complete; ``--threshold auto`` with a
    language pair always needs it (known pairs are encoded for the recall estimate).
    """
    needs_gold = config.threshold == "auto" and bool(config.src_lang and config.tgt_lang)
    if enc.executor != "local" and not needs_gold:
        return None
    stores_ready = all(
        _store_ready(ShardStore(workdir / side), f, identity, enc) for side, f in (("src", src), ("tgt", tgt))
    )
    if stores_ready and not needs_gold:
        return None
    from babelspace.backends import load_backend_encoder

    return load_backend_encoder(
        model, enc.backend, enc.quantize, device=enc.device, max_seq_length=enc.max_seq_length
    )


def _encode_sides(
    model: str,
    identity: str,
    enc: EncodeOptions,
    workdir: Path,
    src: SentenceFile,
    tgt: SentenceFile,
    loaded: Any,
) -> tuple[dict[str, ShardStore], dict[str, Any]]:
    """Encode (or resume) both sides into ``workdir/src`` and ``workdir/tgt``: stores and their reports."""
    encoding = {}
    stores = {}
    for side, f in (("src", src), ("tgt", tgt)):
        store = ShardStore(workdir / side)
        encoding[side] = encode_to_shards(
            f.texts,
            store,
            model,
            f.fingerprint,
            enc,
            model=loaded if enc.executor == "local" else None,
            desc=f"encode {side}",
            identity=identity,
        )
        stores[side] = store
    return stores, encoding


def _gold_vectors(
    config: MiningConfig, loaded: Any, enc: EncodeOptions, timings: dict[str, float]
) -> tuple[np.ndarray, np.ndarray] | None:
    """Known-pair vectors for ``--threshold auto``'s recall estimate (timed as ``gold_s``), or None."""
    if config.threshold != "auto" or loaded is None:
        return None
    from babelspace.mining.threshold import gold_vectors

    with _timed(timings, "gold_s"):
        return gold_vectors(loaded, config.src_lang, config.tgt_lang, enc.batch_size)


def _encoding_summary(
    model: str,
    identity: str,
    enc: EncodeOptions,
    workdir: Path,
    stores: dict[str, ShardStore],
    encoding: dict[str, Any],
) -> dict[str, Any]:
    """The summary's model and encoding fields."""
    return {
        "model": model,
        "model_identity": identity,
        "dim": stores["src"].dim,
        "dtype": enc.dtype,
        "shard_size": enc.shard_size,
        "workdir": str(workdir),
        "encoding": encoding,
        "executor": enc.executor,
        "workers": enc.workers,
    }


def _selection_summary(config: MiningConfig, result: MiningResult, kept_share: float) -> dict[str, Any]:
    """The summary's search, threshold and count fields."""
    cal = result.calibration
    return {
        "src_lang": config.src_lang,
        "tgt_lang": config.tgt_lang,
        "k": result.k,
        "k_requested": config.k,
        "margin": str(config.margin),
        "retrieval": config.retrieval,
        "index": config.index,
        "nprobe": config.nprobe if config.index != "flat" else None,
        "threshold": result.threshold,
        "threshold_source": cal.describe() if cal else "given",
        "calibration": cal.to_dict() if cal else None,
        "estimated_precision": cal.precision if cal else None,
        "estimated_recall": cal.recall if cal else None,
        "kept_share": round(kept_share, 4),
        "candidates": result.n_candidates,
        "one_to_one": result.n_one_to_one,
        "pairs": len(result.pairs),
        "max_memory_bytes": config.max_memory,
        "plans": {k: asdict(v) for k, v in result.plans.items()},
    }


def _store_ready(store: ShardStore, f: SentenceFile, identity: str, enc: EncodeOptions) -> bool:
    m = store.read_manifest()
    if m is None:
        return False
    same = (m.model, m.n, m.fingerprint, m.dtype, m.shard_size) == (
        identity,
        len(f),
        f.fingerprint,
        enc.dtype,
        enc.shard_size,
    )
    return same and not store.missing_shards()
