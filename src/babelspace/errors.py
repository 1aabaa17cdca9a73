"""Exception families. Each names what failed and tells the user what to do."""

from __future__ import annotations

from pathlib import Path


class BabelspaceError(Exception):
    """Base class of every error babelspace raises on purpose."""


class CorpusFormatError(BabelspaceError):
    """A corpus file is malformed. Carries the file and 1-based line number."""

    def __init__(self, path: str | Path, line: int | None, reason: str, hint: str | None = None) -> None:
        self.path = str(path)
        self.line = line
        self.reason = reason
        where = f"{self.path}:{line}" if line is not None else self.path
        msg = f"{where}: {reason}"
        if hint:
            msg += f" ({hint})"
        super().__init__(msg)


class ResourceError(BabelspaceError):
    """A model, corpus or other resource cannot be found or loaded."""


class TrainingError(BabelspaceError):
    """Training cannot go on (non-finite loss, bad configuration, unwritable output...)."""


def first_error_line(exc: BaseException, *, with_type: bool = False) -> str:
    """The first line of ``exc``'s message (at most 300 characters), for a one-line error that
    quotes its cause; the exception's type name when the message is empty. ``with_type`` puts the
    type name before the line (``OSError: ...``)."""
    text = str(exc).strip()
    kind = type(exc).__name__
    if not text:
        return kind
    line = text.splitlines()[0][:300]
    return f"{kind}: {line}" if with_type else line
