"""Margin-based parallel sentence mining over corpora that do not fit in memory.

- :mod:`~babelspace.mining.corpus`: read and clean one-sentence-per-line (or ``id<TAB>sentence``) files;
- :mod:`~babelspace.vectors.shards`: embeddings as ``.npy`` shards with a manifest, memory-mapped;
- :mod:`~babelspace.mining.encode`: encode missing shards in-process, on a local process pool or on Ray;
- :mod:`~babelspace.mining.memory`: the memory budget and the chunk sizes derived from it;
- :mod:`~babelspace.mining.search`: shard-by-shard exact (faiss flat) or IVF / IVF-PQ top-k search;
- :mod:`~babelspace.mining.core`: the configuration, the search and candidate selection;
- :mod:`~babelspace.mining.decoys`: the decoy searches of the run's own vectors (cross-lingual and
  monolingual) that ``--threshold auto`` is calibrated on;
- :mod:`~babelspace.mining.calibration`: ``--threshold auto``, aimed at a target precision, with a point
  estimate of the kept pairs' precision and the interval that bounds it;
- :mod:`~babelspace.mining.threshold`: :func:`mine_embeddings`: candidates kept above a fixed or
  calibrated threshold;
- :mod:`~babelspace.mining.pipeline`: the whole :func:`mine_files` pipeline;
- :mod:`~babelspace.mining.filters`: cheap bitext filters (duplicates, identical, length ratio, script,
  language);
- :mod:`~babelspace.mining.score`: ``babelspace score``, margin scores and filters of an existing
  bitext on the same shards, search and threshold logic.

Sentence alignment of parallel documents (``babelspace align``), beside the miner:
:mod:`~babelspace.mining.align_dp` (the banded dynamic programme and its config) ->
:mod:`~babelspace.mining.align_cost` (vecalign's normalised embedding cost, coarse to fine) and
:mod:`~babelspace.mining.gale_church` (the length-based baseline) -> :mod:`~babelspace.mining.align`
(encoding and the files pipeline); :mod:`~babelspace.mining.align_docs` reads the documents.

Imports run one way: ``core`` -> ``decoys`` -> ``calibration`` -> ``threshold`` -> ``pipeline``. kNN and margins come
from :mod:`babelspace.retrieval.knn`.
"""
