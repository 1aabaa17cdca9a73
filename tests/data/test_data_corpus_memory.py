"""Memory of a large converted corpus stays flat in its size: rows drawn at random (the fit samples,
the English fit sample, the batches) leave none of the corpus file mapped in the process (the
kernel maps a 64 KB window of a cached file per row read, so the resident memory of an 8M-pair run
grew by about 1 GB), and the training set's per-pair state is integer arrays, not Python objects."""

from __future__ import annotations

import random
import sys
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from babelspace.data.arrow_corpus import CorpusRows, ReadOptions, open_corpus
from babelspace.data.indexed_pairs import IndexedCorpus, PairParts
from babelspace.data.pairs import ReadReport
from babelspace.training.setup.english_fit import english_fit_texts

PAIRS = 200_000
WORDS = [f"w{k:04d}" for k in range(5000)]


def _tsv(path: Path, n: int) -> Path:
    rng = random.Random(0)
    langs = ["de", "fr", "es", "it"]
    with path.open("w", encoding="utf-8") as f:
        for i in range(n):
            src = " ".join(rng.choices(WORDS, k=rng.randint(3, 12)))
            tgt = " ".join(rng.choices(WORDS, k=rng.randint(3, 12)))
            f.write(f"{src}\t{tgt}\ten\t{langs[i % 4]}\n")
    return path


@pytest.fixture(scope="module")
def big(tmp_path_factory) -> IndexedCorpus:
    folder = tmp_path_factory.mktemp("big")
    corpus = open_corpus(str(_tsv(folder / "pairs.tsv", PAIRS)), ReadOptions(), folder / "cache")
    return IndexedCorpus("big", PairParts([("big", CorpusRows(corpus))]), ReadReport("big"))


def _rss_file_kb() -> int | None:
    """Resident pages of this process that map files (Linux), in KB."""
    status = Path("/proc/self/status")
    if not status.is_file():
        return None
    for line in status.read_text().splitlines():
        if line.startswith("RssFile:"):
            return int(line.split()[1])
    return None


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RssFile of /proc/self/status")
def test_random_rows_leave_no_corpus_pages_mapped(big) -> None:
    corpus = big.pairs.parts[0].pairs.corpus
    size_kb = (corpus.folder / "pairs.arrow").stat().st_size // 1024
    assert size_kb > 8_000  # a file much larger than the bound below
    rows = np.random.default_rng(0).choice(PAIRS, 4_000, replace=False)
    big.pairs.take(rows[:10])  # the code paths' own first-use allocations, before measuring
    before = _rss_file_kb()
    pairs = big.pairs.take(rows)
    texts = english_fit_texts(big, 1_000, seed=0)
    arrays = big.pairs.arrays(by_source=False, texts=True)
    grown = _rss_file_kb() - before
    # without the release, 4,000 rows at 64 KB each map the whole file
    assert grown < 2_048, f"{grown} KB of the {size_kb} KB corpus file stayed mapped"
    assert len(pairs) == 4_000 and len(texts) == 1_000 and len(arrays.lengths) == PAIRS
    # pages given back read again: the same pairs
    assert big.pairs.take(rows[:50]) == pairs[:50]


def test_per_pair_state_is_integer_arrays(big) -> None:
    """The training set's views and the fit samples hold numpy integer arrays (a few bytes per pair),
    never a Python object per pair: measured with tracemalloc over a 200k-pair set."""
    tracemalloc.start()
    try:
        arrays = big.pairs.arrays(by_source=True, texts=True)
        keys = big.pairs.pair_keys()
        identical = big.pairs.identical()
        texts = english_fit_texts(big, 1_000, seed=0)
        current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert arrays.groups.dtype.kind == "i" and arrays.lengths.dtype.kind == "i"
    assert arrays.text_ids.dtype == np.uint64 and keys.dtype == np.uint64 and identical.dtype == bool
    assert len(texts) == 1_000
    held = arrays.groups.nbytes + arrays.lengths.nbytes + arrays.text_ids.nbytes + keys.nbytes
    held += identical.nbytes
    # what is still allocated is those arrays (plus a little); a Python object per pair (a str or a
    # ParallelPair is 50-200 bytes) would be 10-40 MB more
    assert current < held + 4 * 2**20, (current, held)
    assert peak < 3 * held + 8 * 2**20, (peak, held)
