"""Memory budget of the out-of-core search: parse ``--max-memory`` and derive chunk sizes from it.

The search holds, at any time, a *fixed* part and one *block*:

- fixed: the top-k lists of both directions (``(n + m) * k`` similarities and ids), the margin
  scores and the selection arrays (all proportional to the number of sentences, not to ``n * m``),
  plus, for IVF indexes, the trained quantiser / PQ tables and one shard read buffer;
- block: ``db_rows`` database rows (the float32 copy read from the shards and the faiss index built
  on it), ``query_rows`` query rows, the similarity tile of the search and the merge temporaries.

:func:`plan_search` picks the largest database chunk that fits next to a query chunk (halving the
query chunk when needed) and raises :class:`~babelspace.errors.ResourceError` when not even one
row of each fits. The model, the sentence texts and the interpreter are not part of the budget.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass

from babelspace.errors import ResourceError

__all__ = ["ChunkPlan", "format_bytes", "mining_fixed_bytes", "parse_memory", "plan_search"]

_UNITS = {
    "": 1,
    "B": 1,
    "K": 1024,
    "KB": 1024,
    "KIB": 1024,
    "M": 1024**2,
    "MB": 1024**2,
    "MIB": 1024**2,
    "G": 1024**3,
    "GB": 1024**3,
    "GIB": 1024**3,
    "T": 1024**4,
    "TB": 1024**4,
    "TIB": 1024**4,
}

# faiss' exact inner-product search tiles the similarity matrix in blocks of at most
# (distance_compute_blas_query_bs = 4096) x (distance_compute_blas_database_bs = 1024) floats.
_FAISS_TILE_Q = 4096
_FAISS_TILE_DB = 1024
MAX_QUERY_ROWS = 4096


def parse_memory(value: str | int) -> int:
    """``"4GB"``, ``"512M"``, ``"1.5GiB"`` or a plain byte count -> bytes (units are powers of 1024)."""
    if isinstance(value, int):
        n = value
    else:
        m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([A-Za-z]*)\s*", value)
        if not m or m.group(2).upper() not in _UNITS:
            raise ValueError(f"cannot read a memory size from {value!r}; write e.g. 4GB, 512MB or 800000000")
        n = int(float(m.group(1)) * _UNITS[m.group(2).upper()])
    if n <= 0:
        raise ValueError(f"memory size must be positive, got {value!r}")
    return n


def format_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


#: Candidate and one-to-one selection arrays per sentence: ids, scores and masks of both directions.
SELECTION_BYTES_PER_SENTENCE = 64


def mining_fixed_bytes(n_src: int, n_tgt: int, k: int) -> int:
    """Bytes proportional to the corpus size that mining holds during the whole search.

    Top-k similarities (float32) and ids (int64) of both directions, the margin scores of every
    candidate (float32 + a float32 temporary), and the candidate/selection arrays (~64 bytes per
    sentence).
    """
    rows = n_src + n_tgt
    return rows * k * (4 + 8) + rows * k * 8 + rows * SELECTION_BYTES_PER_SENTENCE


@dataclass(frozen=True)
class ChunkPlan:
    """Chunk sizes of one search and the memory they were derived from (all in bytes)."""

    db_rows: int
    query_rows: int
    budget_bytes: int
    fixed_bytes: int
    block_bytes: int

    @property
    def total_bytes(self) -> int:
        return self.fixed_bytes + self.block_bytes

    def to_dict(self) -> dict[str, int]:
        return asdict(self)


def _block_bytes(q: int, c: int, dim: int, k: int, index_row_bytes: int, backend: str, exact: bool) -> int:
    read = 2 + 4  # a float16 row read from disk and its float32 copy (float32 shards: an upper bound)
    db = c * (dim * read + index_row_bytes)
    queries = q * dim * read
    merge = q * k * (4 + 8) * 4  # search result, running best, concatenation and sorted copy
    if not exact:
        tile = 0  # IVF scans lists: a few (q x nprobe) arrays, counted in the merge term
    elif backend == "numpy":
        tile = q * c * (4 + 4 + 8)  # similarities, their negation, argpartition indices
    else:
        tile = min(q, _FAISS_TILE_Q) * min(c, _FAISS_TILE_DB) * 4
    return db + queries + merge + tile


def plan_search(
    n_queries: int,
    n_db: int,
    dim: int,
    k: int,
    budget_bytes: int,
    *,
    fixed_bytes: int = 0,
    index: str = "flat",
    index_row_bytes: int | None = None,
    backend: str = "faiss",
    max_query_rows: int = MAX_QUERY_ROWS,
) -> ChunkPlan:
    """Largest database chunk (and a query chunk) whose working set fits ``budget_bytes - fixed_bytes``.

    ``index_row_bytes`` is what the index stores per database row (flat: ``4 * dim``; IVF-flat:
    ``4 * dim + 8``; IVF-PQ: code size + 8). Raises :class:`ResourceError` when not even one query row
    and one database row fit.
    """
    if index_row_bytes is None:
        index_row_bytes = 4 * dim if index == "flat" else 4 * dim + 8
    exact = index == "flat"
    avail = budget_bytes - fixed_bytes
    n_queries, n_db = max(1, n_queries), max(1, n_db)
    q = max(1, min(n_queries, max_query_rows))
    while True:
        base = _block_bytes(q, 0, dim, k, index_row_bytes, backend, exact)
        per_row = _block_bytes(q, 1, dim, k, index_row_bytes, backend, exact) - base
        if exact and backend != "numpy":
            # The faiss tile grows with c only up to _FAISS_TILE_DB rows: charge it in full up front.
            base += min(q, _FAISS_TILE_Q) * _FAISS_TILE_DB * 4
            per_row -= min(q, _FAISS_TILE_Q) * 4
        c = (avail - base) // per_row if avail > base else 0
        if c >= min(n_db, q) or (q == 1 and c >= 1):
            break
        if q == 1:
            need = fixed_bytes + _block_bytes(1, 1, dim, k, index_row_bytes, backend, exact)
            raise ResourceError(
                f"--max-memory {format_bytes(budget_bytes)} is too small: the per-sentence arrays of "
                f"this corpus take {format_bytes(fixed_bytes)} and one search block at least "
                f"{format_bytes(need - fixed_bytes)}; give at least {format_bytes(2 * need)}"
            )
        q //= 2
    c = int(min(c, n_db))
    block = _block_bytes(q, c, dim, k, index_row_bytes, backend, exact)
    return ChunkPlan(
        db_rows=c, query_rows=q, budget_bytes=budget_bytes, fixed_bytes=fixed_bytes, block_bytes=block
    )
