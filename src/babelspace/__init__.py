"""babelspace: one shared sentence-embedding space for every language."""

__version__ = "0.1.0"
