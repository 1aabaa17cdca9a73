"""Prompt names of saved models, as MTEB and sentence-transformers ask for them.

MTEB's sentence-transformers wrapper (and ``SentenceTransformer.encode_query`` / ``encode_document``)
look up the prompts named ``query`` and ``document``. e5 models prefix queries with ``"query: "`` and
documents with ``"passage: "``, and babelspace first saved the latter under e5's own name,
``passage``; sentence-transformers 6 then adds an empty ``document`` prompt on save, so MTEB encoded
documents without e5's prefix. :func:`mteb_prompts` maps ``passage`` onto ``document`` (keeping
``passage`` for code that asks for it by that name); every model babelspace loads goes through it,
so every model it saves carries both names.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["DOCUMENT", "LEGACY_DOCUMENT", "QUERY", "mteb_prompts", "trained_prompts"]

QUERY = "query"
DOCUMENT = "document"
#: e5's name for the document prompt, as babelspace saved it before it used MTEB's names.
LEGACY_DOCUMENT = "passage"


def mteb_prompts(prompts: Mapping[str, str | None] | None) -> dict[str, str | None]:
    """``prompts`` with ``document`` set to the ``passage`` prompt when it is missing or empty."""
    out = dict(prompts or {})
    if out.get(LEGACY_DOCUMENT) and not out.get(DOCUMENT):
        out[DOCUMENT] = out[LEGACY_DOCUMENT]
    return out


def trained_prompts(prompts: Mapping[str, str | None] | None, trained: str) -> dict[str, str]:
    """The prompts a trained model saves: every name of ``prompts``, and MTEB's ``query`` and
    ``document``, mapped to ``trained``, the one prompt training prepended to both sides of every
    pair (so ``encode_document`` and MTEB do not use a prompt the model never trained with, e.g.
    e5's ``passage: ``). A model without prompts and no trained prompt keeps none."""
    names = set(prompts or {})
    if not names and not trained:
        return {}
    return {name: trained for name in sorted(names | {QUERY, DOCUMENT})}
