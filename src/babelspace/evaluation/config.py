"""The configuration of one ``babelspace eval`` run, validated when it is built."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

from babelspace.errors import BabelspaceError, ResourceError
from babelspace.evaluation.tasks.names import ALL_TASKS, parse_tasks
from babelspace.retrieval.knn import Margin

__all__ = ["DIRECTIONS", "QUICK_MAX_SENTENCES", "EvalConfig"]

#: xsim directions: sources in the other language searching English, or also English searching them.
DIRECTIONS: tuple[str, ...] = ("xx2en", "both")

#: Bible verses per language of the quick default run (sized so ``babelspace eval MODEL`` on e5-small
#: takes under 5 minutes on 2 CPU cores; docs/evaluation.md). ``full`` evaluates all of them.
QUICK_MAX_SENTENCES = 500


def parse_margin(value: Margin | str) -> Margin:
    """``"ratio"`` -> :attr:`Margin.RATIO`; an unknown name is a :class:`BabelspaceError`."""
    try:
        return Margin(value)
    except ValueError:
        raise BabelspaceError(
            f"unknown margin {value!r}; use one of {', '.join(m.value for m in Margin)}"
        ) from None


@dataclass
class EvalConfig:
    """Everything a run depends on (saved in the JSON report).

    ``full`` picks the full-size protocol on the default Bible data: every test verse, and BUCC gold
    hidden among train-book verses. Without it (the quick default) the Bible is cut to
    :data:`QUICK_MAX_SENTENCES` verses per language unless ``max_sentences`` says otherwise, and BUCC
    hides its gold among the other evaluated verses, whose vectors the other tasks have already made.

    Validated and normalised when built (task names canonical, ``margin`` a :class:`Margin`, languages
    lower-case); a bad value raises :class:`BabelspaceError` (:class:`ResourceError` for a missing file).
    """

    model: str
    tasks: list[str] = field(default_factory=lambda: list(ALL_TASKS))
    data: list[str] | None = None
    langs: list[str] | None = None
    src_lang: str | None = None
    tgt_lang: str | None = None
    teacher: str = "minilm"
    margin: Margin = Margin.RATIO
    k: int = 4
    direction: str = "xx2en"
    max_sentences: int | None = None
    seed: int = 0
    batch_size: int = 64
    max_seq_length: int | None = None
    device: str | None = None
    backend: str = "torch"
    quantize: str = "none"
    xsimpp_files: tuple[str, str] | None = None
    tatoeba_dir: str | None = None
    bucc_dir: str | None = None
    bucc_ratio: float = 4.0
    sts_files: list[str] = field(default_factory=list)
    plots_dir: str | None = None
    progress: bool = False
    full: bool = False

    def __post_init__(self) -> None:
        self.tasks = parse_tasks(self.tasks)
        self.margin = parse_margin(self.margin)
        if self.langs is not None:
            self.langs = [lang.strip().lower() for lang in self.langs if lang.strip()]
        self._check_numbers()
        from babelspace.models.backends import validate_backend

        validate_backend(self.backend, self.quantize)
        self._check_paths()

    def _check_numbers(self) -> None:
        if self.direction not in DIRECTIONS:
            raise BabelspaceError(f"unknown direction {self.direction!r}; use 'xx2en' or 'both'")
        if self.k < 1:
            raise BabelspaceError(f"--k must be >= 1, got {self.k}")
        if self.max_sentences is not None and self.max_sentences < 2:
            raise BabelspaceError(f"--max-sentences must be >= 2, got {self.max_sentences}")
        if self.batch_size < 1:
            raise BabelspaceError(f"--batch-size must be >= 1, got {self.batch_size}")
        if self.bucc_ratio < 0:
            raise BabelspaceError(f"--bucc-ratio must be >= 0, got {self.bucc_ratio}")

    def _check_paths(self) -> None:
        for name, value in (("--tatoeba-dir", self.tatoeba_dir), ("--bucc-dir", self.bucc_dir)):
            if value is not None and not Path(value).is_dir():
                raise ResourceError(f"{name} {value}: not a directory")
        for f in [*self.sts_files, *(self.xsimpp_files or ())]:
            if not Path(f).is_file():
                raise ResourceError(f"file not found: {f}")

    def bible_max_sentences(self) -> int | None:
        """Verses per language taken from the default Bible: ``max_sentences`` when given, else all
        of them (``full``) or :data:`QUICK_MAX_SENTENCES`."""
        if self.max_sentences is not None or self.full:
            return self.max_sentences
        return QUICK_MAX_SENTENCES

    def validate(self) -> EvalConfig:
        """A new, validated copy (for a config whose fields were changed after it was built); this
        config is left as it is."""
        return dataclasses.replace(self)
