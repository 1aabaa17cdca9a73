"""LASER Tatoeba files (``tatoeba.xxx-eng.{xxx,eng}``): one aligned sentence per line. Scoring is
:mod:`babelspace.metrics.tatoeba`."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from babelspace.data.lines import strict_lines
from babelspace.errors import CorpusFormatError, ResourceError

logger = logging.getLogger(__name__)


_FILE = re.compile(r"^tatoeba\.([a-z]{3})-eng\.\1$")


@dataclass
class TatoebaPair:
    """Aligned sentences of one language and English (``xx[i]`` translates ``en[i]``)."""

    lang: str
    xx: list[str]
    en: list[str]


def _read_lines(path: Path) -> list[str]:
    """Every line of ``path``, blank ones at the end included (they break the alignment)."""
    return [text for _, text in strict_lines(path, keep_blank_tail=True)]


def read_tatoeba_dir(directory: str | Path, langs: Iterable[str] | None = None) -> dict[str, TatoebaPair]:
    """Read LASER's Tatoeba layout: ``tatoeba.{xxx}-eng.{xxx}`` and ``tatoeba.{xxx}-eng.eng`` per language.

    ``langs`` (3-letter codes) restricts and requires the languages; default every language found.
    Both files of a language must have the same number of lines (:class:`CorpusFormatError` otherwise,
    pointing at the first line the shorter file lacks).
    """
    directory = Path(directory)
    if not directory.is_dir():
        raise ResourceError(f"{directory}: not a directory (expected LASER's tatoeba/v1 folder)")
    if langs is None:
        found = sorted(m.group(1) for p in directory.iterdir() if (m := _FILE.match(p.name)))
        if not found:
            raise ResourceError(f"{directory}: no tatoeba.xxx-eng.xxx files found")
        lang_list = found
    else:
        lang_list = list(langs)
    out: dict[str, TatoebaPair] = {}
    for lang in lang_list:
        xx_path = directory / f"tatoeba.{lang}-eng.{lang}"
        en_path = directory / f"tatoeba.{lang}-eng.eng"
        for p in (xx_path, en_path):
            if not p.is_file():
                raise ResourceError(
                    f"{p}: missing (expected tatoeba.{lang}-eng.{lang} and tatoeba.{lang}-eng.eng)"
                )
        xx, en = _read_lines(xx_path), _read_lines(en_path)
        if len(xx) != len(en):
            shorter, longer = (xx_path, en_path) if len(xx) < len(en) else (en_path, xx_path)
            raise CorpusFormatError(
                shorter,
                min(len(xx), len(en)) + 1,
                f"has {min(len(xx), len(en))} lines but {longer.name} has {max(len(xx), len(en))}",
                hint="the two files must be aligned line by line",
            )
        out[lang] = TatoebaPair(lang, xx, en)
        logger.debug("tatoeba %s: %d pairs", lang, len(xx))
    return out
