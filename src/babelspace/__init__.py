"""babelspace: one shared sentence-embedding space for every language.

The Python API is one function per job, the same as the command of that name does
(:mod:`babelspace.api`)::

    import babelspace

    result = babelspace.train(data=["pairs.tsv"], tgt_lang="de", output="runs/de")
    print(babelspace.evaluate("runs/de", tasks="xsim,tatoeba"))
    vectors = babelspace.encode("runs/de", ["Hello world", "Hallo Welt"])

``import babelspace`` stays light: each name is imported from :mod:`babelspace.api` when first used.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

#: The public API: the job functions and their result types, all defined in :mod:`babelspace.api`.
__all__ = [
    "AlignResult",
    "EncodeResult",
    "EvalResult",
    "ExportResult",
    "MineResult",
    "ScoreResult",
    "align",
    "encode",
    "evaluate",
    "export",
    "mine",
    "score",
    "train",
]


def __getattr__(name: str) -> Any:
    """``babelspace.train`` etc., imported from :mod:`babelspace.api` on first use (PEP 562)."""
    if name in __all__:
        from babelspace import api

        return getattr(api, name)
    raise AttributeError(f"module 'babelspace' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
