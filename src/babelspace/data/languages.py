"""Language codes: validation and guessing from file names.

A valid code is either an ISO 639-1 two-letter code (``de``), an ISO 639-3 style three-letter code
(``deu``), or a three-letter code with a FLORES-style script suffix (``zho_Hans``). Codes are
case-insensitive on input; the canonical form is lower case, with the script suffix title-cased.
"""

from __future__ import annotations

import re
from pathlib import Path

from babelspace.errors import CorpusFormatError

__all__ = ["ISO_639_1", "is_valid_lang", "lang_from_suffix", "validate_lang"]

#: Every ISO 639-1 code (including the deprecated ``bh``, still found in older corpora).
ISO_639_1: frozenset[str] = frozenset(
    """
    aa ab ae af ak am an ar as av ay az ba be bg bh bi bm bn bo br bs ca ce ch co cr cs cu cv cy
    da de dv dz ee el en eo es et eu fa ff fi fj fo fr fy ga gd gl gn gu gv ha he hi ho hr ht hu
    hy hz ia id ie ig ii ik io is it iu ja jv ka kg ki kj kk kl km kn ko kr ks ku kv kw ky la lb
    lg li ln lo lt lu lv mg mh mi mk ml mn mr ms mt my na nb nd ne ng nl nn no nr nv ny oc oj om
    or os pa pi pl ps pt qu rm rn ro ru rw sa sc sd se sg si sk sl sm sn so sq sr ss st su sv sw
    ta te tg th ti tk tl tn to tr ts tt tw ty ug uk ur uz ve vi vo wa wo xh yi yo za zh zu
    """.split()
)

_THREE_LETTER = re.compile(r"[a-z]{3}(?:_[A-Z][a-z]{3})?")

# Three-letter file extensions that must not be taken for ISO 639-3 codes in `lang_from_suffix`.
_NOT_LANG_SUFFIXES = frozenset(
    "txt tsv csv xml json jsonl tmx xlf sgm gz bz2 xz zst arrow parquet bin dat raw tok bpe spm out log src tgt ref hyp".split()
)


def _canonical(code: str) -> str:
    code = code.strip()
    lang, sep, script = code.partition("_")
    return lang.lower() + (sep + script.title() if sep else "")


def is_valid_lang(code: str) -> bool:
    """True if ``code`` (any case) is a valid language code."""
    canon = _canonical(code)
    return canon in ISO_639_1 or _THREE_LETTER.fullmatch(canon) is not None


def validate_lang(code: str, path: str | Path | None = None, line: int | None = None) -> str:
    """Return the canonical form of ``code`` or raise `CorpusFormatError`.

    ``path``/``line`` say where the code was read; without them the error names ``<argument>``.
    """
    if not isinstance(code, str) or not is_valid_lang(code):
        raise CorpusFormatError(
            path if path is not None else "<argument>",
            line,
            f"unknown language code {code!r}",
            hint="use an ISO 639-1 code such as 'de', an ISO 639-3 code such as 'deu', or a FLORES code such as 'zho_Hans'",
        )
    return _canonical(code)


def lang_from_suffix(path: str | Path) -> str | None:
    """The language named by a file's last suffix, or None.

    ``corpus.de`` -> ``"de"``, ``train.en-de.de`` -> ``"de"``, ``dev.zho_Hans`` -> ``"zho_Hans"``.
    Three-letter suffixes that are common file extensions (``.txt``, ``.tsv``...) are not languages.
    """
    suffix = Path(path).suffix[1:]
    if not suffix:
        return None
    canon = _canonical(suffix)
    if canon in ISO_639_1:
        return canon
    if _THREE_LETTER.fullmatch(canon) and canon not in _NOT_LANG_SUFFIXES:
        return canon
    return None
