"""Parallel data: the line reader with file:line errors, corpus readers, the offline Bible, other sources
and the --data mix, and batch samplers."""
