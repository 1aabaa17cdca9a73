"""Parallel data: readers with file:line validation, the offline Bible, and batch samplers."""

from babelspace.data.bible import (
    BIBLE_VERSIONS,
    COPYRIGHTED,
    DEFAULT_VERSION,
    DEV_BOOKS,
    TEST_BOOKS,
    TRAIN_BOOKS,
    bible_languages,
    bible_pairs,
    bible_parallel_texts,
    bible_verses,
)
from babelspace.data.languages import ISO_639_1, is_valid_lang, lang_from_suffix, validate_lang
from babelspace.data.pairs import ParallelCorpus, ParallelPair, ReadReport, normalize_whitespace
from babelspace.data.readers import (
    filter_langs,
    load_parallel,
    read_aligned,
    read_hf_dataset,
    read_tsv,
    subsample,
)
from babelspace.data.sampling import BalancedBatchSampler

__all__ = [
    "BIBLE_VERSIONS",
    "COPYRIGHTED",
    "DEFAULT_VERSION",
    "DEV_BOOKS",
    "ISO_639_1",
    "TEST_BOOKS",
    "TRAIN_BOOKS",
    "BalancedBatchSampler",
    "ParallelCorpus",
    "ParallelPair",
    "ReadReport",
    "bible_languages",
    "bible_pairs",
    "bible_parallel_texts",
    "bible_verses",
    "filter_langs",
    "is_valid_lang",
    "lang_from_suffix",
    "load_parallel",
    "normalize_whitespace",
    "read_aligned",
    "read_hf_dataset",
    "read_tsv",
    "subsample",
    "validate_lang",
]
