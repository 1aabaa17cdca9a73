"""The one reader of table-shaped corpora: rows of a `datasets` table (a ``save_to_disk`` folder, a Hub
dataset, JSON/CSV/Parquet files) as corpus rows, with one rule for their columns.

Columns (`resolve_columns`): the text columns are ``--src-col``/``--tgt-col`` (default ``src`` and
``tgt``); a table without ``src``/``tgt`` but with sentence-transformers' parallel-sentences columns
``english``/``non_english`` is read from those, as it is. Each row's languages come from the
``--src-lang-col``/``--tgt-lang-col`` columns, else from columns named ``src_lang`` and ``tgt_lang``
when the table has both (they win over the options, as a TSV's language columns do), else from
``--src-lang`` (default ``en``) and ``--tgt-lang``. A missing column is one error naming the table
and the columns it has.

Rows (`dataset_rows`): a missing text (None) is an empty side; any other non-string value is an error
naming the row, even with ``--skip-bad-lines`` (a wrong type is a broken table, not a bad row).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from babelspace.data.corpus_rows import LangPairIds, Row, check_row
from babelspace.data.lines import BadLines
from babelspace.errors import CorpusFormatError, ResourceError

__all__ = ["ST_COLUMNS", "CorpusColumns", "dataset_rows", "load_dataset_split", "resolve_columns"]

logger = logging.getLogger(__name__)

#: sentence-transformers' parallel-sentences datasets (``sentence-transformers/parallel-sentences-*``).
ST_COLUMNS = ("english", "non_english")
_LANG_COLUMNS = ("src_lang", "tgt_lang")
_COLUMN_FLAGS = "pass --src-col/--tgt-col/--src-lang-col/--tgt-lang-col (src_col=/tgt_col=/...)"


@dataclass(frozen=True)
class CorpusColumns:
    """Which columns of a dataset hold the texts (and, optionally, each row's languages)."""

    src: str = "src"
    tgt: str = "tgt"
    src_lang: str | None = None
    tgt_lang: str | None = None

    def names(self) -> list[str]:
        return [c for c in (self.src, self.tgt, self.src_lang, self.tgt_lang) if c is not None]


def resolve_columns(found: Iterable[str], cols: CorpusColumns, label: str | Path) -> CorpusColumns:
    """The columns to read from a table with columns ``found`` (see the module docstring)."""
    found = list(found)
    have = set(found)
    if (cols.src, cols.tgt) == ("src", "tgt") and not {"src", "tgt"} <= have and set(ST_COLUMNS) <= have:
        cols = dataclasses.replace(cols, src=ST_COLUMNS[0], tgt=ST_COLUMNS[1])
    if cols.src_lang is None and cols.tgt_lang is None and set(_LANG_COLUMNS) <= have:
        cols = dataclasses.replace(cols, src_lang=_LANG_COLUMNS[0], tgt_lang=_LANG_COLUMNS[1])
    missing = [c for c in cols.names() if c not in have]
    if missing:
        raise CorpusFormatError(
            label, None, f"no column {missing[0]!r}", hint=f"columns are {found}; {_COLUMN_FLAGS}"
        )
    return cols


def dataset_rows(
    batches: Iterable[dict[str, list[Any]]],
    label: str | Path,
    cols: CorpusColumns,
    langs_given: tuple[str | None, str | None],
    bad: BadLines,
    langs: LangPairIds,
    first_row: int = 0,
) -> Iterator[Row]:
    """The good rows of a table given as column batches; row numbers count from ``first_row`` (0 for
    ``dataset[N]``, 1 for the records of a file). ``langs_given``: the ``--src-lang``/``--tgt-lang``
    options."""
    src_lang, tgt_lang = langs_given
    per_row = cols.src_lang is not None or cols.tgt_lang is not None
    if cols.tgt_lang is None and tgt_lang is None:
        raise CorpusFormatError(
            label, None, "no target language given", hint="pass --tgt-lang or --tgt-lang-col (tgt_lang=...)"
        )
    default = None if per_row else langs.default(src_lang, tgt_lang)
    row = first_row
    for batch in batches:
        n = len(batch[cols.src])
        src_langs = batch[cols.src_lang] if cols.src_lang else [src_lang or "en"] * n
        tgt_langs = batch[cols.tgt_lang] if cols.tgt_lang else [tgt_lang] * n
        for src, tgt, sl, tl in zip(batch[cols.src], batch[cols.tgt], src_langs, tgt_langs, strict=True):
            bad.report.read += 1
            odd = next((t for t in (src, tgt) if t is not None and not isinstance(t, str)), None)
            if odd is not None:
                raise CorpusFormatError(label, row, f"text column holds {type(odd).__name__}, not str")
            fields = [src or "", tgt or "", sl, tl] if per_row else [src or "", tgt or ""]
            got = check_row(label, row, fields, default, bad, langs)
            row += 1
            if got is not None:
                yield got


def load_dataset_split(path: Path, split: str | None, flag: str = "split=") -> tuple[Any, str | None]:
    """The `Dataset` saved in ``path`` (for a `DatasetDict`, its ``split``: unset, its only split,
    else ``train``) and the split used; a missing split names ``flag`` (how the caller's user
    chooses one: ``split=`` in Python, ``--split `` on the command line)."""
    import datasets  # slow to import: only when needed

    if not path.is_dir():
        raise ResourceError(f"dataset directory not found: {path}")
    try:
        ds = datasets.load_from_disk(str(path))
    except FileNotFoundError as exc:
        raise CorpusFormatError(
            path,
            None,
            "not a Hugging Face dataset directory",
            hint="write one with Dataset.save_to_disk(path), or use a folder of .jsonl/.json/.csv/.parquet files",
        ) from exc
    if not isinstance(ds, datasets.DatasetDict):
        if split is not None:
            logger.debug("%s is a single Dataset; split %r not used", path, split)
        return ds, split
    names = list(ds.keys())
    if split is None:
        split = names[0] if len(names) == 1 else "train"
    if split not in ds:
        raise CorpusFormatError(
            path, None, f"no split {split!r}", hint=f"splits are {', '.join(names)}; pass {flag}NAME"
        )
    return ds[split], split
