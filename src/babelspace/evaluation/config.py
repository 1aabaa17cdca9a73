"""The configuration of one ``babelspace eval`` run, validated when it is built."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from babelspace.config_fields import option
from babelspace.errors import BabelspaceError, ResourceError
from babelspace.evaluation.tasks.names import ALL_TASKS, parse_tasks
from babelspace.retrieval.knn import Margin

__all__ = ["DIRECTIONS", "QUICK_MAX_SENTENCES", "EvalConfig"]

#: xsim directions: sources in the other language searching English, or also English searching them.
DIRECTIONS: tuple[str, ...] = ("xx2en", "both")

#: Bible verses per language of the quick default run (sized so ``babelspace eval MODEL`` on e5-small
#: takes under 5 minutes on 2 CPU cores; docs/evaluation.md). ``full`` evaluates all of them.
QUICK_MAX_SENTENCES = 500

# The groups of ``babelspace eval --help`` (a field's group: its ``option``).
DATA, XSIM, STS_MSE, OUTPUT = "data", "xsim / xsim++ / BUCC", "STS / MSE", "output and speed"


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

    model: str = option(
        None, "'minilm', 'e5-small', a sentence-transformers folder or a hub id", "positional",
        positional=True, metavar="MODEL",
    )  # fmt: skip
    tasks: list[str] = option(
        None,
        f"comma-separated tasks from {','.join(ALL_TASKS)}, or 'all'",
        "options",
        default_factory=lambda: list(ALL_TASKS),
        flag="--task",
        parse="tasks",
        metavar="TASKS",
        shown="all",
    )
    data: list[str] | None = option(
        None,
        "evaluation pairs: 'bible', a TSV, JSON Lines, CSV or Parquet file, 'aligned:SRC_FILE+TGT_FILE' "
        "(two line-aligned files) or a Hugging Face dataset folder; several as a list or joined by commas",
        DATA,
        nargs="+",
        metavar="PATH",
        shown="the Bible test books",
    )
    langs: list[str] | None = option(
        None, "comma-separated language codes (default: every language)", DATA, parse="comma_list"
    )
    src_lang: str | None = option(
        None, "source language of 2-column TSV / aligned files (en when unset)", DATA
    )
    tgt_lang: str | None = option(
        None, "target language of 2-column TSV / aligned files (unset: asked for when a file needs it)", DATA
    )
    teacher: str = option("minilm", "teacher of the mse task", STS_MSE)
    margin: Margin = Margin.RATIO  # --margin: a shared flag (cli/options.py)
    k: int = option(4, "neighbourhood size of the margin", XSIM, min=1)
    direction: Literal["xx2en", "both"] = option("xx2en", "xsim: xx->en only, or also en->xx", XSIM)
    max_sentences: int | None = option(
        None,
        "seeded random subset of the evaluation pairs per language (the same verses for every language)",
        DATA,
        min=1,
        shown=f"all, or {QUICK_MAX_SENTENCES} Bible verses without --full",
    )
    seed: int = option(0, "seed of subsets, BUCC construction and xsim++ negatives", DATA)
    # how it encodes: the shared flags of every command that encodes (cli/options.py)
    batch_size: int = 64
    max_seq_length: int | None = None
    device: str | None = None
    backend: str = "torch"
    quantize: str = "none"
    xsimpp_files: tuple[str, str] | None = option(
        None,
        "xsim++ with released files: the augmented English file and its error-type JSON (sources are "
        "matched by English text in the evaluation data)",
        XSIM,
        nargs=2,
        metavar=("AUGMENTED", "TYPES"),
        shown="hard negatives generated from the evaluation data",
    )
    tatoeba_dir: str | None = option(
        None, "LASER Tatoeba folder (tatoeba.xxx-eng.{xxx,eng})", XSIM, shown="the evaluation pairs"
    )
    bucc_dir: str | None = option(
        None,
        "BUCC 2018 folder (xx-en.{training,test}.{xx,en,gold})",
        XSIM,
        shown="a BUCC task built from the evaluation pairs",
    )
    bucc_ratio: float = option(
        4.0, "built BUCC task: distractors per gold pair per side (ignored with --bucc-dir)", XSIM, min=0
    )
    sts_files: list[str] = option(
        None,
        "STS17-style or STSb files",
        STS_MSE,
        default_factory=list,
        flag="--sts",
        nargs="+",
        metavar="FILE",
        shown="none: the sts and bias tasks are skipped",
    )
    plots_dir: str | None = option(
        None, "write per-task bar PNGs and a PCA into this folder", OUTPUT, flag="--plots", metavar="DIR",
        shown="no figures",
    )  # fmt: skip
    progress: bool = True  # --no-progress: a shared flag (cli/options.py)
    full: bool = option(
        False,
        "full-size protocol on the Bible: every test verse (the quick default takes "
        f"{QUICK_MAX_SENTENCES} per language) and BUCC gold hidden among --bucc-ratio times as many "
        "train-book verses (the quick default hides it among the other evaluated verses)",
        DATA,
    )

    def __post_init__(self) -> None:
        if not self.model:
            raise BabelspaceError("no model given: a name ('minilm', 'e5-small'), a folder or a hub id")
        self.tasks = parse_tasks(self.tasks)
        if self.xsimpp_files is not None:
            self.xsimpp_files = tuple(str(f) for f in self.xsimpp_files)
        self.sts_files = [str(f) for f in self.sts_files]
        self.plots_dir = None if self.plots_dir is None else str(self.plots_dir)
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
