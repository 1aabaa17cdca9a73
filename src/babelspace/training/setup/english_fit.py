"""The English sample of the closed-form projection fit: distinct English sentences of every training
source, in equal shares per source, so that the map into the teacher's space is fitted on English
of every register the run trains on (verses, CLDR names, fortunes, docstrings, messages, or the
English side of a user's pairs), not only on the parallel fit pairs (docs/distillation.md,
"English fidelity").

Each sentence enters the fit once, through the first term of the distillation loss
(``||M(s) − W·M̂(s)||²``); it needs the teacher's vector of the sentence (cached with the run's
other teacher vectors) and one forward pass of the untrained student.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np

from babelspace.data.apportionment import group_members, weighted_sample_indices
from babelspace.data.indexed_pairs import IndexedCorpus

logger = logging.getLogger(__name__)

#: Candidate pairs drawn per English sentence wanted (a verse repeats once per language and version).
OVERSAMPLE = 4


def english_fit_texts(train: IndexedCorpus, n: int, seed: int, exclude: Sequence[str] = ()) -> list[str]:
    """Up to ``n`` distinct English sentences (source sides whose language is ``en``) of ``train``,
    in equal shares per source (a source with fewer gives the rest to the others), seeded, sorted;
    none of ``exclude`` (the parallel fit sample's English, already in the fit)."""
    if n <= 0 or len(train) == 0:
        return []
    sources, codes = _source_codes(train)
    members = group_members(codes, len(sources))
    candidates = weighted_sample_indices(
        members, np.ones(len(sources)), min(len(codes), OVERSAMPLE * n), seed
    )
    skip = set(exclude)
    by_source: dict[int, dict[str, None]] = {}
    for i, pair in zip(candidates, train.pairs.take(candidates), strict=True):
        if pair.src_lang == "en" and pair.src not in skip:
            by_source.setdefault(int(codes[i]), {})[pair.src] = None
    texts = [list(found) for _, found in sorted(by_source.items())]
    if not texts:
        return []
    offsets = np.cumsum([0] + [len(t) for t in texts])
    groups = [np.arange(offsets[k], offsets[k + 1]) for k in range(len(texts))]
    flat = [t for found in texts for t in found]
    chosen = weighted_sample_indices(groups, np.ones(len(groups)), n, seed + 1)
    out = sorted({flat[i] for i in chosen})
    logger.info(
        "closed-form fit: %d English sentences from %d sources (%s)",
        len(out),
        len(texts),
        ", ".join(f"{sources[k]} {len(v)}" for k, v in sorted(by_source.items())),
    )
    return out


def _source_codes(train: IndexedCorpus) -> tuple[list[str], np.ndarray]:
    """The sources of ``train`` and each pair's source index."""
    names, codes = train.pairs.groups(by_source=True)
    sources = sorted({name[0] for name in names})
    index = {s: k for k, s in enumerate(sources)}
    per_group = np.array([index[name[0]] for name in names], dtype=np.int64)
    return sources, per_group[codes]
