"""A run's output folder: ownership checks and atomic export, the exported model, its model card and
the run log."""
