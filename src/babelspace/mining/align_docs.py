"""The documents ``babelspace align`` reads: which pairs (two files, two folders, or a list) and their
sentences.

A document is a UTF-8 text file with one sentence per line. Blank lines are not sentences (counted,
not aligned); whitespace runs, tabs included, become one space. A line that is not UTF-8 is an error
naming the file and line, or with ``skip_bad_lines`` a counted skip. Document pairs come from

- ``src`` and ``tgt`` files: one pair;
- ``src`` and ``tgt`` folders: the files of the same name in both (a name in one folder only is an
  error listing it);
- a pairs list: one ``src_path<TAB>tgt_path`` per line, relative paths taken from the list's folder.
  An entry that leaves that folder (an absolute path, ``..``, or a symbolic link pointing out of it)
  is refused unless ``allow_outside_paths`` is given: a list written by someone else must not make
  the command read (and copy into its output) any file of the machine.

Each pair records what it was read through (:attr:`DocumentPair.read_from`: the two files, the two
folders, or the list and its entries), so the output check keeps the output apart from all of them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from babelspace.data.lines import BadLines, numbered_lines, require_file, strict_lines
from babelspace.data.pairs import ReadReport, normalize_whitespace
from babelspace.errors import CorpusFormatError, ResourceError
from babelspace.mining.align_dp import AlignError
from babelspace.writable import Named

__all__ = ["Document", "DocumentPair", "document_pairs", "read_document"]

_UTF8_HINT = (
    "documents must be UTF-8: convert the file (e.g. iconv -f latin1 -t utf-8), or pass --skip-bad-lines "
    "to skip and count such lines"
)


@dataclass(frozen=True)
class DocumentPair:
    """Two documents to align; ``name`` identifies the pair in the output ids."""

    name: str
    src: Path
    tgt: Path
    #: ``(flag, path)`` of everything this pair was read through (files, folders, the pairs list).
    read_from: tuple[Named, ...] = field(default=(), compare=False)

    def inputs(self) -> tuple[Named, ...]:
        """What the pair reads: :attr:`read_from`, or its two files when that was not recorded."""
        return self.read_from or (("--src", self.src), ("--tgt", self.tgt))


@dataclass
class Document:
    """One document's sentences and the file line each came from (1-based)."""

    path: Path
    lines: list[str] = field(default_factory=list)
    numbers: list[int] = field(default_factory=list)
    blank: int = 0
    bad: int = 0

    def __len__(self) -> int:
        return len(self.lines)


def read_document(path: str | Path, skip_bad_lines: bool = False) -> Document:
    """The sentences of ``path`` (see the module docstring)."""
    path = Path(path)
    require_file(path)
    report = ReadReport(str(path))
    doc = Document(path)
    try:
        for number, text in numbered_lines(path, BadLines(report, skip_bad_lines)):
            sentence = normalize_whitespace(text)
            if not sentence:
                doc.blank += 1
                continue
            doc.lines.append(sentence)
            doc.numbers.append(number)
    except CorpusFormatError as exc:
        raise CorpusFormatError(exc.path, exc.line, exc.reason, hint=_UTF8_HINT) from None
    doc.bad = report.total_skipped
    return doc


def _outside(entry: Path, folder: Path) -> bool:
    """``entry`` (as written in the list) leaves ``folder``: absolute, or resolving outside it."""
    if entry.is_absolute():
        return True
    base = folder.resolve()
    return base != (base / entry).resolve() and base not in (base / entry).resolve().parents


def _pairs_list(path: Path, allow_outside_paths: bool = False) -> list[DocumentPair]:
    require_file(path)
    pairs = []
    for number, text in strict_lines(path):
        if not text.strip():
            continue
        fields = text.split("\t")
        if len(fields) != 2 or not all(f.strip() for f in fields):
            raise CorpusFormatError(
                path, number, f"expected 'src_path<TAB>tgt_path', found {len(fields)} field(s)"
            )
        src, tgt = (Path(f.strip()) for f in fields)
        for entry in (src, tgt):
            if not allow_outside_paths and _outside(entry, path.parent):
                raise CorpusFormatError(
                    path,
                    number,
                    f"{entry} lies outside the list's folder {path.parent}",
                    hint="entries are read relative to the list's folder; pass --allow-outside-paths if "
                    "you trust the list to read files elsewhere",
                )
        src, tgt = (p if p.is_absolute() else path.parent / p for p in (src, tgt))
        read_from = (("--pairs", path), ("--pairs entry", src), ("--pairs entry", tgt))
        pairs.append(DocumentPair(str(src), src, tgt, read_from))
    if not pairs:
        raise AlignError(f"{path}: the pairs list names no documents")
    return pairs


def _folder_pairs(src: Path, tgt: Path) -> list[DocumentPair]:
    names0 = {p.name for p in src.iterdir() if p.is_file() and not p.name.startswith(".")}
    names1 = {p.name for p in tgt.iterdir() if p.is_file() and not p.name.startswith(".")}
    for a, b, only in ((src, tgt, sorted(names0 - names1)), (tgt, src, sorted(names1 - names0))):
        if only:
            shown = ", ".join(only[:5]) + (f" and {len(only) - 5} more" if len(only) > 5 else "")
            raise AlignError(f"{len(only)} file(s) of {a} have no file of the same name in {b}: {shown}")
    if not names0:
        raise AlignError(f"{src} and {tgt} hold no documents")
    read_from = (("--src", src), ("--tgt", tgt))
    return [DocumentPair(name, src / name, tgt / name, read_from) for name in sorted(names0)]


def document_pairs(
    src: str | Path | None = None,
    tgt: str | Path | None = None,
    pairs_list: str | Path | None = None,
    *,
    allow_outside_paths: bool = False,
) -> list[DocumentPair]:
    """The document pairs of two files, two folders or a pairs list (see the module docstring)."""
    if pairs_list is not None:
        if src is not None or tgt is not None:
            raise AlignError("give either --pairs or --src and --tgt, not both")
        return _pairs_list(Path(pairs_list), allow_outside_paths)
    if src is None or tgt is None:
        raise AlignError("give --src and --tgt (two files or two folders), or --pairs LIST")
    src, tgt = Path(src), Path(tgt)
    for p in (src, tgt):
        if not p.exists():
            raise ResourceError(f"document not found: {p}")
    if src.is_dir() and tgt.is_dir():
        return _folder_pairs(src, tgt)
    if src.is_dir() or tgt.is_dir():
        raise AlignError(f"--src and --tgt must both be files or both be folders ({src}, {tgt})")
    return [DocumentPair(src.name, src, tgt, (("--src", src), ("--tgt", tgt)))]
