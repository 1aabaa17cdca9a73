"""Retrieval: exact k-nearest-neighbour search, margin scores, candidates and one-to-one selection;
the one implementation behind evaluation and mining."""
