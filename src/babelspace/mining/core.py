"""Margin-based bitext mining of two embedding matrices: the configuration, the search and the
candidate selection (:func:`select_candidates`), and mining at a fixed threshold (:func:`mine_at`).

Scoring is margin-based (Artetxe & Schwenk, ACL 2019, arXiv 1811.01136) with the shared
:func:`babelspace.retrieval.knn.margin_score`. The threshold step (fixed, or ``auto``: calibrated
for a target precision) is :mod:`babelspace.mining.threshold`; imports run ``core`` -> ``decoys`` ->
``calibration`` -> ``threshold`` -> ``pipeline``. :data:`DEFAULT_THRESHOLDS` are the fixed values
LASER-style mining uses (ratio 1.06, the strict end of WikiMatrix/CCMatrix's 1.04–1.06).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

from babelspace.config_fields import option
from babelspace.data.languages import is_valid_lang
from babelspace.errors import BabelspaceError
from babelspace.mining.guards import clip_k
from babelspace.mining.memory import ChunkPlan, mining_fixed_bytes, parse_memory, plan_search
from babelspace.mining.search import IndexKind, SearchOptions, index_fixed_bytes, index_row_bytes, sharded_knn
from babelspace.retrieval.knn import (
    Backend,
    Candidates,
    Margin,
    Retrieval,
    greedy_one_to_one,
    margin_candidates,
)
from babelspace.vectors.shards import Matrix

__all__ = [
    "DEFAULT_THRESHOLDS",
    "SCORING",
    "SEARCH",
    "MiningConfig",
    "MiningResult",
    "Selection",
    "default_threshold",
    "mine_at",
    "peak_rss_bytes",
    "plan_mining",
    "select_candidates",
]

logger = logging.getLogger(__name__)

#: Fixed score thresholds (not the default; ``--threshold auto`` is). Ratio: LASER's mining threshold
#: (1.04–1.06 in WikiMatrix and CCMatrix). Distance: cos − neighbourhood mean, a heuristic of similar
#: strictness for neighbourhoods around 0.6–0.7 cosine. Absolute: a plain cosine.
DEFAULT_THRESHOLDS = {Margin.RATIO: 1.06, Margin.DISTANCE: 0.04, Margin.ABSOLUTE: 0.8}


def default_threshold(margin: Margin | str) -> float:
    return DEFAULT_THRESHOLDS[Margin(margin)]


# The groups of ``babelspace mine --help`` (a field's group: its ``option``).
SCORING = "scoring"
SEARCH = "search"


@dataclass
class MiningConfig:
    """How ``babelspace mine`` scores, searches and selects pairs; each field made with ``option`` is
    a flag of ``mine`` (``cli/config_flags.py`` builds them; ``--margin`` is a flag shared with
    ``eval`` and ``score``)."""

    k: int = option(4, "neighbourhood size of the margin", SCORING, min=1)
    margin: Margin = Margin.RATIO
    retrieval: Retrieval = option(
        "max",
        "candidates: forward (each source's best target), backward, intersect (mutual best) or max (the "
        "union; BUCC's pool)",
        SCORING,
    )
    # "auto" (or None): the lowest threshold whose estimated precision on this run reaches
    # target_precision (babelspace.mining.calibration); a number: kept as given
    threshold: float | str | None = option(
        "auto",
        "keep pairs scoring >= T; 'auto': the lowest threshold whose estimated precision on this run "
        "reaches --target-precision (when none does, the best-supported set, said in one warning line; "
        "docs/mining.md says how it is estimated and how far to trust it). "
        f"LASER's fixed value is {DEFAULT_THRESHOLDS[Margin.RATIO]} (ratio margin)",
        SCORING,
        parse="threshold",
    )
    target_precision: float = option(
        0.9, "precision --threshold auto aims at (between 0 and 1)", SCORING, parse="fraction"
    )
    # language pair: the summary; with check_recall the recall estimate
    src_lang: str | None = option(
        None,
        "language of --src (written to the summary for 'babelspace train'; with --tgt-lang and "
        "--check-recall, --threshold auto also estimates recall on known Bible pairs)",
        SCORING,
        shown="not recorded",
    )
    tgt_lang: str | None = option(None, "language of --tgt (see --src-lang)", SCORING, shown="not recorded")
    check_recall: bool = option(
        False,
        "with --threshold auto and --src-lang/--tgt-lang in the Bible's languages: estimate recall on "
        "known Bible dev verse pairs planted into the decoys (encodes a few thousand verses; off unless asked)",
        SCORING,
    )
    index: IndexKind = option("flat", "flat = exact", SEARCH)
    nprobe: int = option(16, "IVF lists visited per query", SEARCH, min=1)
    nlist: int | None = option(None, "IVF lists", SEARCH, min=1, shown="about 4 x sqrt(n)")
    pq_m: int | None = option(None, "ivfpq bytes per vector", SEARCH, min=1, shown="dim/8")
    max_memory: int = option(
        4 * 1024**3, "search memory budget, e.g. 4GB, 512MB", SEARCH, parse="memory", shown="4GB"
    )
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
        if self.check_recall and not (self.src_lang and self.tgt_lang):
            raise BabelspaceError(
                "--check-recall needs --src-lang and --tgt-lang (the known pairs' languages)"
            )
        if self.check_recall and self.threshold != "auto":
            raise BabelspaceError(
                "--check-recall estimates the recall of --threshold auto; drop --threshold T"
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
    calibration: Any = None  # a mining.calibration.Calibration when --threshold auto chose the threshold


def peak_rss_bytes(children: bool = False) -> int:
    """Peak resident memory of this process (or of its finished children), from getrusage; 0 (not
    measured) where the platform has no ``resource`` module (Windows)."""
    try:
        import resource
    except ImportError:
        return 0
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


@dataclass
class Selection:
    """The candidates of one search: every margin candidate of ``config.retrieval``, its greedy
    one-to-one subset (best first) and, when asked, the mutual (intersect) candidates."""

    n_candidates: int
    one_to_one: Candidates
    mutual: Candidates | None
    plans: dict[str, ChunkPlan]
    timings: dict[str, float]
    k: int


def select_candidates(
    src: Matrix, tgt: Matrix, config: MiningConfig, mutual: bool = False, warn_k: bool = True
) -> Selection:
    """Search both ways within the memory budget, score by margin, keep a greedy one-to-one set
    (``warn_k``: warn when ``config.k`` is clipped to the corpus)."""
    if src.dim != tgt.dim:
        raise ValueError(f"dimension mismatch: source {src.dim}, target {tgt.dim}")
    k = clip_k(config.k, len(src), len(tgt), warn=warn_k)
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
    both = margin_candidates(*lists, config.margin, "intersect", k=config.k) if mutual else None
    del fwd_sims, fwd_ids, bwd_sims, bwd_ids, lists
    one = cands.subset(greedy_one_to_one(cands.src, cands.tgt, cands.scores))
    timings["select_s"] = time.perf_counter() - t0
    return Selection(len(cands), one, both, plans, timings, k)


def mine_at(
    src: Matrix, tgt: Matrix, config: MiningConfig, threshold: float, warn_k: bool = True
) -> MiningResult:
    """Mine with a fixed score ``threshold`` (``config.threshold`` is not read)."""
    sel = select_candidates(src, tgt, config, warn_k=warn_k)
    accepted = sel.one_to_one.subset(sel.one_to_one.scores >= threshold)
    return MiningResult(
        accepted, sel.n_candidates, len(sel.one_to_one), threshold, sel.plans, sel.timings, sel.k
    )
