"""Candidate pairs from margin-scored neighbour lists, and the greedy one-to-one selection.

The implementation is the one shared with evaluation (BUCC, xsim) in :mod:`babelspace.evaluation.knn`;
this module names what mining uses from it. Retrieval modes (as in LASER's ``mine_bitexts``,
Artetxe & Schwenk 2019):

- ``forward``: every source with its best target by margin;
- ``backward``: every target with its best source;
- ``intersect``: only pairs that are each other's best (forward and backward agree);
- ``max``: the union of forward and backward candidates (the BUCC protocol's pool).

The pool is then made one-to-one greedily: sorted by descending score, a pair is kept only if neither
its source nor its target was kept before (:func:`greedy_one_to_one`).
"""

from __future__ import annotations

from babelspace.evaluation.knn import (
    NEIGHBOURHOOD_FLOOR,
    RETRIEVALS,
    Candidates,
    Retrieval,
    greedy_one_to_one,
    margin_candidates,
    masked_mean,
    neighbourhood_mean,
)

__all__ = [
    "NEIGHBOURHOOD_FLOOR",
    "RETRIEVALS",
    "Candidates",
    "Retrieval",
    "greedy_one_to_one",
    "margin_candidates",
    "masked_mean",
    "neighbourhood_mean",
]
