"""Which reader a local corpus path needs, told from its suffix, its first line or its folder's files.

`corpus_format` answers one of:

- ``"dataset"``: a folder written by ``Dataset.save_to_disk``/``DatasetDict.save_to_disk``
  (`babelspace.data.dataset_rows`);
- ``"json"``, ``"csv"``, ``"parquet"``: a file with that suffix (``.jsonl`` and ``.json`` are JSON)
  (`babelspace.data.data_files`);
- ``"folder"``: any other folder, read as a folder of such files (`babelspace.data.data_files`);
- ``"mined"``: ``babelspace mine`` output (`babelspace.data.mined`);
- ``"tsv"``: a ``.tsv`` file, or any file whose first non-blank line has a tab
  (`babelspace.data.text_rows`);
- ``"text"``: any other file: one sentence per line, half of a line-aligned pair
  (``aligned:SRC_FILE+TGT_FILE``), not a corpus on its own.

A sniff reads the first line only, never the whole file.
"""

from __future__ import annotations

from pathlib import Path

from babelspace.data.data_files import data_file_format
from babelspace.data.lines import first_line
from babelspace.data.mined import is_mined_file

__all__ = ["corpus_format", "looks_like_tsv"]


def looks_like_tsv(path: Path) -> bool:
    if path.suffix.lower() == ".tsv":
        return True
    raw = first_line(path)
    return raw is not None and b"\t" in raw


def corpus_format(path: Path) -> str:
    """The kind of corpus an existing ``path`` holds (see the module docstring)."""
    if path.is_dir():
        if (path / "state.json").is_file() or (path / "dataset_dict.json").is_file():
            return "dataset"
        return "folder"
    fmt = data_file_format(path)
    if fmt is not None:
        return fmt
    if is_mined_file(path):
        return "mined"
    return "tsv" if looks_like_tsv(path) else "text"
