"""xsim++: xsim with rule-based hard negatives in the English target pool.

Protocol of Chen et al., "xSIM++: An Improved Proxy to Bitext Mining Performance for Low-Resource
Languages" (ACL 2023, arXiv 2306.12907): every English target is perturbed by simple rules into
sentences that look alike but mean something else; the perturbed sentences are added to the target
pool, xsim is computed as usual (margin, k=4) and every error is attributed to the type of the hard
negative that won. The paper's transformations are *number replacement*, *named-entity replacement*
and *causality alternation* (which covers negation). This module tags negation edits ``"negation"``
separately by default; ``generate_hard_negatives(..., split_negation=False)`` tags them
``"causality"`` as the paper does.

The rules here are a re-implementation from the paper's description, not LASER's released set, so
absolute numbers on generated negatives are comparable between models evaluated here, not with the
published table. For published numbers, read LASER's released augmented file with
:func:`read_xsimpp_files`.
"""

from __future__ import annotations

import logging
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from babelspace.metrics.xsim import xsim_predict
from babelspace.retrieval.knn import Backend, Margin

logger = logging.getLogger(__name__)

NUMBER = "number"
ENTITY = "entity"
CAUSALITY = "causality"
NEGATION = "negation"
OTHER = "other"
NEGATIVE_TYPES: tuple[str, ...] = (NUMBER, ENTITY, CAUSALITY, NEGATION)


@dataclass(frozen=True)
class HardNegative:
    """A perturbed copy of target ``source_index`` of the given ``type``."""

    text: str
    source_index: int
    type: str


@dataclass
class XsimppResult:
    """xsim++ errors. Rates are percentages of ``n``; per-type counts sum to ``errors``."""

    errors: int
    n: int
    error_rate: float
    errors_by_type: dict[str, int]
    error_rate_by_type: dict[str, float]
    predictions: np.ndarray | None = field(default=None, repr=False, compare=False)


# --------------------------------------------------------------------------- generation rules

_CARDINALS = [
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
]
_MAGNITUDES = ["hundred", "thousand"]
_ORDINALS = ["first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth"]
_NUMBER_CLASSES = [_CARDINALS, _MAGNITUDES, _ORDINALS]
_NUMBER_WORD = re.compile(r"\b(" + "|".join(_CARDINALS + _MAGNITUDES + _ORDINALS) + r")\b", re.IGNORECASE)
_DIGITS = re.compile(r"\d+")

_CONNECTIVE_SWAPS = {
    "because": "although",
    "although": "because",
    "though": "because",
    "since": "although",
    "but": "so",
    "therefore": "however",
    "however": "therefore",
    "thus": "however",
    "before": "after",
    "after": "before",
    "if": "unless",
    "unless": "if",
}
_CONNECTIVE = re.compile(r"\b(" + "|".join(_CONNECTIVE_SWAPS) + r")\b", re.IGNORECASE)
# "so" is a connective only after a comma or at the start ("so big" is not causal).
_SO_CONNECTIVE = re.compile(r"(?:(?<=,\s)|^)(so)\b", re.IGNORECASE)

_APOS = "['\u2019]"
_NT_SPECIAL = {"ca": "can", "wo": "will", "sha": "shall", "ai": "is"}  # stems of can't, won't, ...
_NT = re.compile(r"\b(\w+?)n" + _APOS + r"t\b", re.IGNORECASE)
_NOT = re.compile(r"\bnot\s+", re.IGNORECASE)
_CANNOT = re.compile(r"\bcannot\b", re.IGNORECASE)
_NEVER = re.compile(r"\bnever\b", re.IGNORECASE)
_ALWAYS = re.compile(r"\balways\b", re.IGNORECASE)
_AUX = re.compile(
    r"\b(is|are|was|were|am|can|could|will|would|should|must|may|might|shall)\b(?!\s+not\b)", re.IGNORECASE
)
_PERFECT = re.compile(r"\b(has|have|had)\b(?=\s+\w+(?:ed|en)\b)(?!\s+not\b)", re.IGNORECASE)
_PAST_VERB = re.compile(r"(?<=\s)([a-z]+ed)\b")

_CAPITALISED = re.compile(r"\b[A-Z][a-z]+(?:-[A-Z][a-z]+)*\b")
_NOT_ENTITIES = {"I", "I'm", "I'd", "I'll", "I've", "Mr", "Mrs", "Ms", "Dr", "God"}


def _match_case(original: str, replacement: str) -> str:
    if len(original) > 1 and original.isupper():
        return replacement.upper()
    if original[:1].isupper():
        return replacement[:1].upper() + replacement[1:]
    return replacement


def _splice(text: str, start: int, end: int, new: str) -> str:
    out = text[:start] + new + text[end:]
    return re.sub(r"\s{2,}", " ", out).strip()


def _number_edits(text: str, rng: random.Random) -> list[str]:
    edits = []
    for m in _DIGITS.finditer(text):
        value = int(m.group())
        digits = len(m.group())
        lo, hi = (0, 9) if digits == 1 else (10 ** (digits - 1), 10**digits - 1)
        new = value
        while new == value:
            new = rng.randint(lo, hi)
        edits.append(_splice(text, m.start(), m.end(), str(new)))
    for m in _NUMBER_WORD.finditer(text):
        word = m.group().lower()
        cls = next(c for c in _NUMBER_CLASSES if word in c)
        new_word = rng.choice([w for w in cls if w != word])
        edits.append(_splice(text, m.start(), m.end(), _match_case(m.group(), new_word)))
    return edits


def _entity_sites(text: str) -> list[re.Match[str]]:
    """Capitalised words that do not start a sentence."""
    sites = []
    for m in _CAPITALISED.finditer(text):
        before = text[: m.start()].rstrip(" \t\"'\u201c\u2018([")
        if not before or before[-1] in ".!?:;":
            continue
        if m.group() in _NOT_ENTITIES:
            continue
        sites.append(m)
    return sites


def _causality_edits(text: str) -> list[str]:
    edits = []
    for m in _CONNECTIVE.finditer(text):
        new = _CONNECTIVE_SWAPS[m.group().lower()]
        edits.append(_splice(text, m.start(), m.end(), _match_case(m.group(), new)))
    for m in _SO_CONNECTIVE.finditer(text):
        edits.append(_splice(text, m.start(1), m.end(1), _match_case(m.group(1), "but")))
    return edits


def _negation_edits(text: str) -> list[str]:
    edits = []
    # removals
    for m in _NT.finditer(text):
        stem = m.group(1)
        new = _NT_SPECIAL.get(stem.lower(), stem)
        edits.append(_splice(text, m.start(), m.end(), _match_case(stem, new)))
    for m in _NOT.finditer(text):
        edits.append(_splice(text, m.start(), m.end(), ""))
    for m in _CANNOT.finditer(text):
        edits.append(_splice(text, m.start(), m.end(), _match_case(m.group(), "can")))
    for m in _NEVER.finditer(text):
        edits.append(_splice(text, m.start(), m.end(), _match_case(m.group(), "always")))
    # insertions
    for m in _ALWAYS.finditer(text):
        edits.append(_splice(text, m.start(), m.end(), _match_case(m.group(), "never")))
    has_negation = bool(_NT.search(text) or _NOT.search(text) or _CANNOT.search(text) or _NEVER.search(text))
    if not has_negation:
        aux = _AUX.search(text) or _PERFECT.search(text)
        if aux is not None:
            edits.append(_splice(text, aux.end(), aux.end(), " not"))
        else:
            verb = _PAST_VERB.search(text)
            if verb is not None:
                edits.append(_splice(text, verb.start(), verb.start(), "never "))
    return edits


def generate_hard_negatives(
    texts: Sequence[str],
    seed: int = 0,
    max_per_type: int = 1,
    *,
    split_negation: bool = True,
) -> list[HardNegative]:
    """Rule-based hard negatives of English ``texts`` (xsim++ transformations).

    Types: ``"number"`` (digits, or English number words one..twelve / hundred / thousand /
    first..tenth replaced by different ones), ``"entity"`` (a capitalised word that does not start the
    sentence swapped for a capitalised word taken from the *other* sentences of ``texts``),
    ``"causality"`` (because<->although, so<->but, before<->after, if<->unless, ...) and
    ``"negation"`` (remove not / n't / never, insert not after an auxiliary or never before a past
    verb, always -> never). With ``split_negation=False`` negation edits are tagged ``"causality"``.

    At most ``max_per_type`` negatives per sentence and type, chosen at random (deterministic for a
    given ``seed``). A negative is never identical to its source sentence nor to any sentence of
    ``texts``, and duplicates are dropped.
    """
    if max_per_type < 1:
        raise ValueError(f"max_per_type must be >= 1, got {max_per_type}")
    rng = random.Random(seed)
    originals = set(texts)

    # entity pool: capitalised words with the sentences they occur in
    occurs: dict[str, set[int]] = {}
    sites_per_text: list[list[re.Match[str]]] = []
    for i, text in enumerate(texts):
        sites = _entity_sites(text)
        sites_per_text.append(sites)
        for m in sites:
            occurs.setdefault(m.group(), set()).add(i)
    pool_words = sorted(occurs)

    out: list[HardNegative] = []
    seen: set[tuple[int, str]] = set()
    for i, text in enumerate(texts):
        per_type: dict[str, list[str]] = {NUMBER: _number_edits(text, rng)}
        entity_edits = []
        if sites_per_text[i]:
            pool = [w for w in pool_words if occurs[w] != {i}]
            for m in sites_per_text[i]:
                choices = [w for w in pool if w != m.group()]
                if choices:
                    entity_edits.append(_splice(text, m.start(), m.end(), rng.choice(choices)))
        per_type[ENTITY] = entity_edits
        per_type[CAUSALITY] = _causality_edits(text)
        negation_type = NEGATION if split_negation else CAUSALITY
        per_type.setdefault(negation_type, []).extend(_negation_edits(text))

        for neg_type, edits in per_type.items():
            unique = [e for e in dict.fromkeys(edits) if e != text and e not in originals]
            rng.shuffle(unique)
            taken = 0
            for edit in unique:
                if taken >= max_per_type:
                    break
                if (i, edit) in seen:
                    continue
                seen.add((i, edit))
                out.append(HardNegative(edit, i, neg_type))
                taken += 1
    logger.debug("generated %d hard negatives for %d sentences", len(out), len(texts))
    return out


# --------------------------------------------------------------------------- scoring


def xsimpp_errors(
    src_emb: np.ndarray,
    tgt_emb: np.ndarray,
    neg_emb: np.ndarray,
    neg_source_index: Sequence[int] | np.ndarray,
    neg_types: Sequence[str],
    margin: Margin | str = Margin.RATIO,
    k: int = 4,
    *,
    tgt_texts: Sequence[str] | None = None,
    backend: Backend = "faiss",
) -> XsimppResult:
    """xsim++ of sources ``src_emb`` [n, d] against targets ``tgt_emb`` [n, d] plus hard negatives.

    Source i's gold target is target i. The pool is ``tgt_emb`` followed by ``neg_emb``; the margin
    neighbourhoods are taken over that whole pool (and over all sources). An error is a source whose
    best target is not its gold target; it is attributed to the type of the winning negative, or to
    ``"other"`` when another real target won. With ``tgt_texts``, a real target whose text equals the
    gold text counts as right (duplicates).
    """
    n, m = src_emb.shape[0], tgt_emb.shape[0]
    if n != m:
        raise ValueError(f"xsim++ needs aligned sources and targets, got {n} and {m}")
    neg_source_index = np.asarray(neg_source_index, dtype=np.int64)
    if not (neg_emb.shape[0] == len(neg_source_index) == len(neg_types)):
        raise ValueError(
            f"{neg_emb.shape[0]} negative vectors, {len(neg_source_index)} source indices, {len(neg_types)} types"
        )
    if len(neg_source_index) and (neg_source_index.min() < 0 or neg_source_index.max() >= m):
        raise ValueError("neg_source_index out of range of the targets")
    types = list(dict.fromkeys([*NEGATIVE_TYPES, *neg_types, OTHER]))
    by_type = dict.fromkeys(types, 0)
    if n == 0:
        return XsimppResult(0, 0, 0.0, by_type, dict.fromkeys(types, 0.0))

    pool = np.concatenate([np.asarray(tgt_emb, dtype=np.float32), np.asarray(neg_emb, dtype=np.float32)])
    pred = xsim_predict(src_emb, pool, margin=margin, k=k, backend=backend)
    errors = 0
    for i, p in enumerate(pred):
        if p == i:
            continue
        if p < m:
            if tgt_texts is not None and tgt_texts[p] == tgt_texts[i]:
                continue
            by_type[OTHER] += 1
        else:
            by_type[neg_types[p - m]] += 1
        errors += 1
    rates = {t: 100.0 * c / n for t, c in by_type.items()}
    return XsimppResult(errors, n, 100.0 * errors / n, by_type, rates, pred)


# --------------------------------------------------------------------------- released files
