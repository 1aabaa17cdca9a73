"""Margin-based parallel sentence mining over corpora that do not fit in memory.

- :mod:`~babelspace.mining.corpus`: read and clean one-sentence-per-line (or ``id<TAB>sentence``) files;
- :mod:`~babelspace.mining.shards`: embeddings as ``.npy`` shards with a manifest, memory-mapped;
- :mod:`~babelspace.mining.encode`: encode missing shards in-process, on a local process pool or on Ray;
- :mod:`~babelspace.mining.memory`: the memory budget and the chunk sizes derived from it;
- :mod:`~babelspace.mining.search`: shard-by-shard exact (faiss flat) or IVF / IVF-PQ top-k search;
- :mod:`~babelspace.mining.selection`: margin candidates (forward / backward / intersect / max) and
  greedy one-to-one selection;
- :mod:`~babelspace.mining.calibration`: ``--threshold auto``, aimed at a target precision with decoy
  searches of the run's own sentences;
- :mod:`~babelspace.mining.mine`: :func:`mine_embeddings` and the whole :func:`mine_files` pipeline.

kNN and margin arithmetic come from :mod:`babelspace.evaluation.knn` (one implementation).
"""

from babelspace.mining.corpus import SentenceFile, read_sentences
from babelspace.mining.encode import EncodeOptions, encode_to_shards, ray_available
from babelspace.mining.memory import ChunkPlan, parse_memory, plan_search
from babelspace.mining.mine import DEFAULT_THRESHOLDS, MiningConfig, MiningResult, mine_embeddings, mine_files
from babelspace.mining.search import SearchOptions, sharded_knn
from babelspace.mining.selection import Candidates, greedy_one_to_one, margin_candidates
from babelspace.mining.shards import ArrayMatrix, Manifest, ShardStore

__all__ = [
    "DEFAULT_THRESHOLDS",
    "ArrayMatrix",
    "Candidates",
    "ChunkPlan",
    "EncodeOptions",
    "Manifest",
    "MiningConfig",
    "MiningResult",
    "SearchOptions",
    "SentenceFile",
    "ShardStore",
    "encode_to_shards",
    "greedy_one_to_one",
    "margin_candidates",
    "mine_embeddings",
    "mine_files",
    "parse_memory",
    "plan_search",
    "ray_available",
    "read_sentences",
    "sharded_knn",
]
