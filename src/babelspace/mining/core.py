"""Margin-based bitext mining of two embedding matrices: the configuration and :func:`mine_embeddings`.

Scoring is margin-based (Artetxe & Schwenk, ACL 2019, arXiv 1811.01136) with the shared
:func:`babelspace.retrieval.knn.margin_score`; the default threshold for the ratio margin is
:data:`DEFAULT_THRESHOLDS` ``["ratio"] = 1.06`` (LASER's WikiMatrix/CCMatrix mining used 1.04–1.06).
Matrices may be in memory or sharded on disk (:mod:`babelspace.mining.shards`); the search runs
shard by shard within a memory budget (:mod:`babelspace.mining.search`).
"""

from __future__ import annotations

import logging
import resource
import time
from dataclasses import dataclass, field

from babelspace.errors import BabelspaceError
from babelspace.mining.guards import clip_k
from babelspace.mining.memory import ChunkPlan, mining_fixed_bytes, parse_memory, plan_search
from babelspace.mining.search import IndexKind, SearchOptions, index_fixed_bytes, index_row_bytes, sharded_knn
from babelspace.mining.shards import Matrix
from babelspace.retrieval.knn import (
    Backend,
    Candidates,
    Margin,
    Retrieval,
    greedy_one_to_one,
    margin_candidates,
)

__all__ = [
    "DEFAULT_THRESHOLDS",
    "MiningConfig",
    "MiningResult",
    "default_threshold",
    "mine_embeddings",
    "peak_rss_bytes",
    "plan_mining",
]

logger = logging.getLogger(__name__)

#: Score thresholds used when none is given. Ratio: LASER's mining threshold (1.04–1.06 in WikiMatrix
#: and CCMatrix). Distance: cos − neighbourhood mean, a heuristic of similar strictness for
#: neighbourhoods around 0.6–0.7 cosine. Absolute: a plain cosine.
DEFAULT_THRESHOLDS = {Margin.RATIO: 1.06, Margin.DISTANCE: 0.04, Margin.ABSOLUTE: 0.8}


def default_threshold(margin: Margin | str) -> float:
    return DEFAULT_THRESHOLDS[Margin(margin)]


@dataclass
class MiningConfig:
    k: int = 4
    margin: Margin = Margin.RATIO
    retrieval: Retrieval = "max"
    # None: "auto" when src_lang and tgt_lang are given, else DEFAULT_THRESHOLDS[margin];
    # "auto": calibrated for the model (babelspace.mining.threshold)
    threshold: float | str | None = None
    src_lang: str | None = None  # language pair of --threshold auto's calibration
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
        if self.threshold is None and self.src_lang and self.tgt_lang:
            self.threshold = "auto"
        if self.threshold == "auto" and not (self.src_lang and self.tgt_lang):
            raise BabelspaceError(
                "--threshold auto needs --src-lang and --tgt-lang (the calibration's language pair)"
            )
        if isinstance(self.threshold, str) and self.threshold != "auto":
            raise BabelspaceError(f"--threshold must be a number or 'auto', not {self.threshold!r}")

    @property
    def effective_threshold(self) -> float:
        if self.threshold == "auto":
            raise BabelspaceError("--threshold auto is resolved by mine_files (calibrate_threshold) first")
        return default_threshold(self.margin) if self.threshold is None else float(self.threshold)

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


def mine_embeddings(src: Matrix, tgt: Matrix, config: MiningConfig | None = None) -> MiningResult:
    """Mine one-to-one pairs between two L2-normalised embedding matrices (see the module docstring)."""
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
    cands = margin_candidates(
        fwd_sims, fwd_ids, bwd_sims, bwd_ids, config.margin, config.retrieval, k=config.k
    )
    del fwd_sims, fwd_ids, bwd_sims, bwd_ids
    one = cands.subset(greedy_one_to_one(cands.src, cands.tgt, cands.scores))
    threshold = config.effective_threshold
    accepted = one.subset(one.scores >= threshold)
    timings["select_s"] = time.perf_counter() - t0
    return MiningResult(accepted, len(cands), len(one), threshold, plans, timings, k)
