"""The Python API: one function per job (:func:`train`, :func:`evaluate`, :func:`encode`,
:func:`mine`, :func:`score`, :func:`align`, :func:`export`), each doing exactly what its
``babelspace`` command does (the command parses its flags, calls the function and prints the
result), reachable as ``babelspace.train(...)`` etc. without importing torch at ``import babelspace``.

A model argument is a name (``'minilm'``, ``'e5-small'``), a local folder, a Hub id or a loaded
``SentenceTransformer``. Each function writes the files its command writes and returns a small
result object holding what the command prints; ``str(result)`` is that text. Keyword options are
the command's flags with ``-`` as ``_`` (``--max-seq-length 128``: ``max_seq_length=128``), named
as in the command's config (``TrainConfig``, ``EvalConfig``, ``MiningConfig``, ``ScoreConfig``,
``AlignConfig``). Errors are exceptions: ``TypeError``/``ValueError`` for a wrong argument, a
:class:`~babelspace.errors.BabelspaceError` subclass for what the run cannot do.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # only for annotations: importing babelspace must not import torch
    import numpy as np

    from babelspace.evaluation.results import EvalReport
    from babelspace.training.config import TrainConfig
    from babelspace.training.output.run_log import TrainResult

__all__ = [
    "AlignResult",
    "EncodeResult",
    "EvalResult",
    "ExportResult",
    "MineResult",
    "ScoreResult",
    "align",
    "encode",
    "evaluate",
    "export",
    "mine",
    "score",
    "train",
]

PathLike = str | Path


class ModelNeeded(ValueError):
    """A job that encodes was given no model (the command says it with its flag's name)."""


def _is_loaded(model: Any) -> bool:
    """A loaded sentence-transformers model (or anything that encodes), not a name or a path."""
    return not isinstance(model, (str, Path)) and callable(getattr(model, "encode", None))


def _model_spec(model: Any, job: str, param: str = "model") -> str:
    """A model given by name or path, as the string the library takes; anything else is a TypeError."""
    if isinstance(model, Path):
        return str(model)
    if isinstance(model, str) and model:
        return model
    if model is None:
        raise TypeError(f"{job}() needs {param}: a name ('minilm', 'e5-small'), a folder, a Hub id or a loaded SentenceTransformer")  # fmt: skip
    raise TypeError(
        f"{job}(): {param} must be a name ('minilm', 'e5-small'), a folder, a Hub id or a loaded "
        f"SentenceTransformer, not {type(model).__name__}"
    )


def _model_folder(model: Any, out: Path, job: str) -> str:
    """A model given by name or path as it is; a loaded one saved beside ``out`` (``OUT_STEM.model/``),
    since the shards of ``mine``/``score`` are keyed by the content of the model's folder (saving the
    same weights again keeps the key, so a rerun reuses the shards)."""
    if not _is_loaded(model):
        return _model_spec(model, job)
    folder = out.with_name(out.stem + ".model")
    model.save(str(folder))
    return str(folder)


def _loaded_name(model: Any) -> str:
    """How a loaded model is named in a report: the folder or Hub id it was loaded from, when known."""
    card = getattr(model, "model_card_data", None)
    for name in (getattr(card, "model_id", None), getattr(card, "base_model", None)):
        if name:
            return str(name)
    return f"{type(model).__name__} (loaded in Python)"


def _unknown(job: str, given: dict[str, Any], known: set[str]) -> None:
    unknown = sorted(set(given) - known)
    if unknown:
        raise TypeError(f"{job}() got unexpected keyword argument(s): {', '.join(unknown)}; known: {', '.join(sorted(known))}")  # fmt: skip


def _field_names(cls: type) -> set[str]:
    return {f.name for f in dataclasses.fields(cls)}


# ----------------------------------------------------------------------------- train
def train(
    config: TrainConfig | dict[str, Any] | PathLike | None = None,
    *,
    push_to_hub: str | None = None,
    hub_private: bool = False,
    command: str | None = None,
    **fields: Any,
) -> TrainResult:
    """Train a multilingual student, as ``babelspace train`` does: the saved model in ``output``
    (``--out``), its card, run log and held-out table.

    ``config``: a :class:`~babelspace.training.config.TrainConfig`, a dict of its fields, the path of
    a YAML/JSON options file (a run's ``babelspace_training.json`` too) or None; ``fields`` are
    TrainConfig fields set on top (``recipe='paper'`` picks a preset first, as ``--recipe`` does).
    ``push_to_hub``: a Hub repository id to upload the result to; ``command``: the command line the
    model card quotes. Returns the :class:`~babelspace.training.output.run_log.TrainResult` (the
    resolved config in ``result.config``, the held-out table in ``result.table``).

    Example::

        import babelspace

        result = babelspace.train(teacher="minilm", student="e5-small", data=["pairs.tsv"],
                                  tgt_lang="de", max_steps=60, output="runs/de")
        print(result.output, result.best_dev, result.table)
    """
    from babelspace.training.config import TrainConfig
    from babelspace.training.recipes import apply_recipe
    from babelspace.training.run import run

    for name in ("teacher", "student"):
        if name in fields and _is_loaded(fields[name]):
            raise TypeError(
                f"train(): {name} must be a name or a folder (the run loads and saves its own copy); "
                f"save a loaded model with model.save(folder) and pass the folder"
            )
        if name in fields:
            fields[name] = _model_spec(fields[name], "train", name)
    if isinstance(config, TrainConfig):
        cfg = dataclasses.replace(config, **fields) if fields else config
    else:
        given: dict[str, Any]
        if config is None:
            given = {}
        elif isinstance(config, dict):
            given = dict(config)
        elif isinstance(config, (str, Path)):
            from babelspace.training.config_file import read_config_file

            given = read_config_file(Path(config))
        else:
            raise TypeError(f"train(): config must be a TrainConfig, a dict, a file path or None, not {type(config).__name__}")  # fmt: skip
        given.update(fields)
        _unknown("train", given, _field_names(TrainConfig))
        cfg = apply_recipe(given.pop("recipe", "babelspace"), given)
    return run(cfg, command=command, push_to_hub=push_to_hub, hub_private=hub_private)


# ----------------------------------------------------------------------------- evaluate
@dataclass
class EvalResult:
    """What ``babelspace eval`` prints (``str(result)``) and writes: the report (every task's figures),
    the JSON file (``out``) and the figures (``plots``)."""

    report: EvalReport
    out: Path | None = None
    plots: list[Path] = field(default_factory=list)

    @property
    def tasks(self) -> dict[str, Any]:
        """Each task's result, by task name."""
        return self.report.tasks

    def __str__(self) -> str:
        from babelspace.evaluation.report import format_report

        lines = [format_report(self.report)]
        if self.out is not None:
            lines.append(f"\nwrote {self.out}")
        lines += [f"wrote {p}" for p in self.plots]
        return "\n".join(lines)


def evaluate(
    model: Any,
    tasks: str | list[str] | None = None,
    data: str | list[str] | None = None,
    out: PathLike | None = None,
    **options: Any,
) -> EvalResult:
    """Evaluate ``model`` as ``babelspace eval`` does: xsim, xsim++, Tatoeba, BUCC, STS, MSE to the
    teacher and language bias, on the offline Bible test books unless ``data`` names other pairs.

    ``tasks``: task names (a list or ``"xsim,tatoeba"``; None: all). ``data``: ``--data`` specs
    (``'bible'``, a TSV/JSONL/CSV/Parquet file, ``'aligned:SRC+TGT'``, a dataset folder). ``out``: write
    every figure and the config as JSON. ``options``: :class:`~babelspace.evaluation.config.EvalConfig`
    fields (``langs=["de", "fr"]``, ``max_sentences=200``, ``full=True``, ``plots_dir="figs"``, ...).

    Example::

        import babelspace

        result = babelspace.evaluate("e5-small", tasks="xsim,tatoeba", langs=["de", "fr"])
        print(result)                      # the tables babelspace eval prints
        result.tasks["xsim"].average       # the figures
    """
    from babelspace.data.mix import local_paths
    from babelspace.evaluation.config import EvalConfig
    from babelspace.evaluation.report import write_json
    from babelspace.evaluation.runner import run_eval
    from babelspace.writable import check_output

    _unknown("evaluate", options, _field_names(EvalConfig) - {"model", "tasks", "data"})
    loaded = model if _is_loaded(model) else None
    name = _loaded_name(model) if loaded is not None else _model_spec(model, "evaluate")
    if isinstance(data, (str, Path)):
        data = [str(data)]
    kwargs = dict(options)
    if tasks is not None:
        kwargs["tasks"] = tasks
    cfg = EvalConfig(model=name, data=data, **kwargs)
    out = Path(out) if out is not None else None
    plots = Path(cfg.plots_dir) if cfg.plots_dir else None
    inputs = [("--data", str(p)) for p in local_paths(cfg.data)] + [("--sts", str(f)) for f in cfg.sts_files]
    inputs += [("--xsimpp-files", str(f)) for f in cfg.xsimpp_files or ()]
    inputs += [("--tatoeba-dir", cfg.tatoeba_dir), ("--bucc-dir", cfg.bucc_dir)]
    models = [("--teacher", cfg.teacher)] + ([] if loaded is not None else [("MODEL", name)])
    if out is not None:  # refused now, not after the whole evaluation
        check_output(out, "--out", inputs=inputs, models=models, report_beside_model=True)
    if plots is not None:
        check_output(plots, "--plots", inputs=inputs, models=models, folder=True)
    report = run_eval(cfg, model=loaded)
    if out is not None:
        write_json(out, report.to_dict())
    return EvalResult(report, out, [Path(p) for p in report.plots])


# ----------------------------------------------------------------------------- encode
@dataclass
class EncodeResult:
    """What ``babelspace encode`` prints and writes: the vectors (one unit-length float32 row per
    line) and the ``.npy`` file they were written to."""

    vectors: np.ndarray
    out: Path | None = None
    blank_lines: int = 0

    def __str__(self) -> str:
        n, d = self.vectors.shape
        where = f" to {self.out}" if self.out is not None else ""
        return f"wrote {n} x {d} float32 vectors{where} ({self.blank_lines} blank lines)"


def encode(
    model: Any,
    texts_or_file: list[str] | tuple[str, ...] | PathLike,
    out: PathLike | None = None,
    *,
    batch_size: int = 64,
    max_seq_length: int | None = None,
    backend: str = "torch",
    quantize: str = "none",
    device: str = "auto",
    workers: int = 1,
    show_progress: bool = True,
    normalize: bool = False,
) -> np.ndarray | EncodeResult:
    """Encode texts as ``babelspace encode`` does: one float32 row per text, in order: what
    ``SentenceTransformer(model).encode`` returns, or with ``normalize=True`` scaled to unit length.

    ``texts_or_file``: a list of texts, or a UTF-8 file with one text per line (a blank line is the
    empty string). Without ``out`` the vectors are returned as a numpy array; with ``out`` they are
    also written there as ``.npy`` (exactly that path) and an :class:`EncodeResult` is returned.

    Example::

        import babelspace

        vecs = babelspace.encode("e5-small", ["Hello world", "Hallo Welt"], normalize=True)
        vecs @ vecs.T                                    # cosines
        babelspace.encode("runs/de", "sentences.txt", out="vectors.npy")
    """
    import numpy as np

    from babelspace.errors import BabelspaceError
    from babelspace.models.backends import load_backend_encoder, validate_backend
    from babelspace.models.encoder import encode as encode_texts

    validate_backend(backend, quantize)
    if workers > 1 and backend != "torch" and not normalize:
        raise BabelspaceError(
            f"--workers {workers} with --backend {backend} writes unit vectors only: add --normalize"
        )
    loaded = model if _is_loaded(model) else None
    spec = None if loaded is not None else _model_spec(model, "encode")
    texts, blank = _encode_inputs(texts_or_file, out, spec)
    if workers > 1 and texts:
        if loaded is not None:
            raise ValueError("encode(): workers > 1 loads the model in each worker; give its name or folder")
        from babelspace.mining.encode import EncodeOptions, encode_in_workers

        opts = EncodeOptions(batch_size=batch_size, max_seq_length=max_seq_length, backend=backend,
                             quantize=quantize, device=device, executor="processes", workers=workers,
                             show_progress=show_progress)  # fmt: skip
        vecs = encode_in_workers(texts, spec, opts, normalize=normalize)
    else:
        if loaded is None:
            loaded = load_backend_encoder(
                spec, backend, quantize, device=device, max_seq_length=max_seq_length
            )
        vecs = encode_texts(
            loaded, texts, batch_size=batch_size, show_progress=show_progress, normalize=normalize
        )
    if out is None:
        return vecs
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "wb") as fh:  # exactly out (np.save on a path would append .npy)
        np.save(fh, vecs)
    return EncodeResult(vecs, out, blank)


def _encode_inputs(texts_or_file: Any, out: PathLike | None, spec: str | None) -> tuple[list[str], int]:
    """``encode()``'s texts and their count of blank lines, after the output check (a file is read
    only once ``out`` is known to be apart from it and writable)."""
    import logging

    from babelspace.data.readers import read_text_lines
    from babelspace.errors import BabelspaceError
    from babelspace.writable import check_output

    models = [("MODEL", spec)] if spec else []
    if not isinstance(texts_or_file, (str, Path)):
        if not (isinstance(texts_or_file, (list, tuple)) and all(isinstance(t, str) for t in texts_or_file)):
            raise TypeError("encode(): texts_or_file must be a list of strings or the path of a text file")
        if out is not None:
            check_output(out, "--out", models=models)
        return list(texts_or_file), 0
    file = Path(texts_or_file)
    if file.is_dir():  # the input's fault, said before the output check would blame --out
        raise BabelspaceError(f"FILE {file} is a folder; give a text file with one sentence per line")
    if out is not None:
        check_output(out, "--out", inputs=[("FILE", file)], models=models)
    texts, blank = read_text_lines(file)
    log = logging.getLogger("babelspace")
    if not texts:
        log.warning("%s has no lines: writing an empty (0 x d) array", file)
    elif blank:
        log.warning("%s: %d blank line(s) encoded as the empty string (one row per line)", file, blank)
    return texts, blank


# ----------------------------------------------------------------------------- mine, score, align
#: Options of the commands that encode into shards, as :class:`~babelspace.mining.encode.EncodeOptions`
#: names them (``ray=True`` is ``--ray``; ``backend`` is the encoding backend: torch, onnx, openvino).
_ENCODING = {"batch_size", "max_seq_length", "backend", "quantize", "device", "shard_size", "fp16",
             "workers", "ray", "ray_address", "ray_gpus_per_worker"}  # fmt: skip


def _split(options: dict[str, Any], *groups: set[str]) -> list[dict[str, Any]]:
    """``options`` cut into one dict per group of names (a name in no group was refused before)."""
    return [{k: v for k, v in options.items() if k in g} for g in groups]


def _encode_options(given: dict[str, Any], show_progress: bool, local_only: bool = False) -> Any:
    from babelspace.mining.encode import EncodeOptions

    given = dict(given)
    ray = given.pop("ray", False)
    workers = given.get("workers", 1)
    if not local_only:
        given["executor"] = "ray" if ray else "processes" if workers > 1 else "local"
    return EncodeOptions(show_progress=show_progress, **given)


def _mining_fields() -> set[str]:
    from babelspace.mining.core import MiningConfig

    return _field_names(MiningConfig) - {"backend", "seed", "show_progress"}


@dataclass
class MineResult:
    """What ``babelspace mine`` writes and prints: the mined pairs (``out``, ``score<TAB>src<TAB>tgt``
    sorted by score), the summary JSON beside it (``summary_path``) and the summary itself (the
    counts, the threshold and how it was chosen, timings)."""

    out: Path
    summary_path: Path
    summary: dict[str, Any]

    @property
    def pairs(self) -> int:
        return self.summary["pairs"]

    @property
    def threshold(self) -> float:
        return self.summary["threshold"]


def mine(
    src: PathLike,
    tgt: PathLike,
    model: Any = None,
    out: PathLike | None = None,
    *,
    workdir: PathLike | None = None,
    ids: bool | None = None,
    max_chars: int | None = None,
    skip_bad_lines: bool = False,
    show_progress: bool = True,
    **options: Any,
) -> MineResult:
    """Mine parallel sentences from two monolingual files, as ``babelspace mine`` does: encode both
    into shards under ``workdir``, search the k nearest neighbours both ways within ``max_memory``,
    score by margin, keep a one-to-one set above ``threshold`` and write it to ``out``.

    ``src``/``tgt``: one sentence per line (or ``id<TAB>sentence``). ``options``:
    :class:`~babelspace.mining.core.MiningConfig` fields (``k``, ``margin``, ``retrieval``,
    ``threshold`` (a number or ``"auto"``), ``target_precision``, ``src_lang``, ``tgt_lang``,
    ``index``, ``max_memory`` (bytes or ``"4GB"``), ...) and the encoding options (``batch_size``,
    ``max_seq_length``, ``backend``, ``quantize``, ``device``, ``shard_size``, ``fp16``, ``workers``,
    ``ray``, ...). Rerunning the same call reuses the finished shards. A loaded model is saved to
    ``OUT_STEM.model/`` beside ``out`` first (the shards are keyed by the model folder's content).

    Example::

        import babelspace

        result = babelspace.mine("en.txt", "de.txt", model="e5-small", out="mined.tsv",
                                 src_lang="en", tgt_lang="de")
        print(result.pairs, result.threshold)
    """
    from babelspace.mining.core import MiningConfig
    from babelspace.mining.corpus import DEFAULT_MAX_CHARS
    from babelspace.mining.pipeline import mine_files, summary_path
    from babelspace.models.backends import validate_backend

    mining_fields = _mining_fields()
    _unknown("mine", options, mining_fields | _ENCODING)
    if out is None:
        raise TypeError("mine() needs out: the path of the TSV to write")
    out = Path(out)
    spec = _model_folder(model, out, "mine")
    config_given, enc_given = _split(options, mining_fields, _ENCODING)
    enc = _encode_options(enc_given, show_progress)
    validate_backend(enc.backend, enc.quantize)
    config = MiningConfig(show_progress=show_progress, **config_given)
    summary = mine_files(src, tgt, out, spec, config, enc, workdir=workdir, ids=ids,
                         max_chars=DEFAULT_MAX_CHARS if max_chars is None else max_chars,
                         skip_bad_lines=skip_bad_lines)  # fmt: skip
    return MineResult(out, summary_path(out), summary)


@dataclass
class ScoreResult:
    """What ``babelspace score`` writes and prints: the kept rows (``out``), every row's score and
    verdict (``scores_path``) and the summary (also written beside ``out``)."""

    out: Path
    scores_path: Path
    summary: dict[str, Any]

    @property
    def kept(self) -> int:
        return self.summary["kept"]

    @property
    def reached(self) -> bool:
        """Whether the threshold rule found rows to keep (False: none kept, said in the summary)."""
        return bool(self.summary["reached"])


#: ``score()``'s filter switches, as :class:`~babelspace.mining.filters.FilterOptions` names them
#: with ``filter_`` in front (``--filter-length-ratio 2``: ``filter_length_ratio=2``).
_FILTERS = {"filter_duplicates", "filter_identical", "filter_length_ratio", "filter_script", "filter_lang"}
_SCORE_INPUTS = {"src_lang", "tgt_lang", "background_src", "background_tgt", "split"}
_SCORE_MINING = {"k", "margin", "threshold", "target_precision", "max_memory", "seed"}


def score(
    bitext: PathLike,
    model: Any = None,
    out: PathLike | None = None,
    *,
    workdir: PathLike | None = None,
    max_chars: int | None = None,
    skip_bad_lines: bool = False,
    show_progress: bool = True,
    **options: Any,
) -> ScoreResult:
    """Score and filter an existing bitext, as ``babelspace score`` does: every pair's margin against
    the neighbourhoods of both sides, the filters switched on, a cut at ``threshold``; the kept rows
    go to ``out`` as ``score<TAB>src_id<TAB>tgt_id<TAB>src<TAB>tgt<TAB>src_lang<TAB>tgt_lang`` (what
    ``train --data`` reads, with the threshold in the summary beside it). ``result.reached`` is False
    when nothing was kept (the command then exits with status 1).

    ``bitext``: a TSV, JSON Lines, CSV or Parquet file, ``babelspace mine`` output,
    ``'aligned:SRC_FILE+TGT_FILE'`` or ``'bible'``. ``options``: ``src_lang``, ``tgt_lang``,
    ``background_src``/``background_tgt`` (lists of monolingual files), ``split`` (a folder's split),
    ``k``, ``margin``, ``threshold``, ``target_precision``, ``max_memory``, ``seed``, the filters ``filter_duplicates``,
    ``filter_identical``, ``filter_length_ratio``, ``filter_script``, ``filter_lang`` and the
    encoding options (``batch_size``, ``device``, ``shard_size``, ...).

    Example::

        import babelspace

        result = babelspace.score("crawl.tsv", model="e5-small", out="kept.tsv",
                                  filter_length_ratio=2.0)
        print(result.kept, result.summary["threshold"])
    """
    from babelspace.mining.corpus import DEFAULT_MAX_CHARS
    from babelspace.mining.filters import FilterOptions
    from babelspace.mining.score import ScoreConfig, ScoreInputs, score_bitext, scores_path
    from babelspace.models.backends import validate_backend

    encoding = _ENCODING - {"workers", "ray", "ray_address", "ray_gpus_per_worker"}
    _unknown("score", options, _SCORE_MINING | _FILTERS | _SCORE_INPUTS | encoding)
    if out is None:
        raise TypeError("score() needs out: the path of the TSV of kept rows")
    out = Path(out)
    spec = _model_folder(model, out, "score")
    config_given, filter_given, input_given, enc_given = _split(
        options, _SCORE_MINING, _FILTERS, _SCORE_INPUTS, encoding
    )
    enc = _encode_options(enc_given, show_progress, local_only=True)
    validate_backend(enc.backend, enc.quantize)
    config = ScoreConfig(show_progress=show_progress, **config_given)
    filters = FilterOptions(**{k.removeprefix("filter_"): v for k, v in filter_given.items()})
    for side in ("background_src", "background_tgt"):
        if side in input_given:
            input_given[side] = [Path(p) for p in input_given[side]]
    inputs = ScoreInputs(str(bitext), max_chars=DEFAULT_MAX_CHARS if max_chars is None else max_chars,
                         skip_bad_lines=skip_bad_lines, **input_given)  # fmt: skip
    summary = score_bitext(inputs, out, spec, config, enc, filters, workdir=workdir)
    return ScoreResult(out, scores_path(out), summary)


@dataclass
class AlignResult:
    """What ``babelspace align`` writes and prints: every aligned block (``out``, ``score<TAB>src_id
    <TAB>tgt_id<TAB>src<TAB>tgt``), the summary JSON beside it (``summary_path``) and the summary."""

    out: Path
    summary_path: Path
    summary: dict[str, Any]

    @property
    def pairs(self) -> int:
        return self.summary["pairs"]


def align(
    src: PathLike | None = None,
    tgt: PathLike | None = None,
    model: Any = None,
    out: PathLike | None = None,
    *,
    pairs: PathLike | None = None,
    src_lang: str | None = None,
    tgt_lang: str | None = None,
    skip_bad_lines: bool = False,
    show_progress: bool = True,
    allow_outside_paths: bool = False,
    **options: Any,
) -> AlignResult:
    """Align the sentences of parallel documents, as ``babelspace align`` does (vecalign's embedding
    cost, or ``method="gale-church"``: sentence lengths only, no model).

    ``src``/``tgt``: two documents (one sentence per line) or two folders of same-named documents;
    ``pairs``: instead, a file of ``src_path<TAB>tgt_path`` lines, whose entries must stay inside the
    list's folder unless ``allow_outside_paths``. ``options``:
    :class:`~babelspace.mining.align_dp.AlignConfig` fields (``method``, ``max_size``,
    ``deletion_percentile``, ``band``, ``max_full_dp``, ``norm_samples``, ``seed``) and the encoding
    options (``batch_size``, ``max_seq_length``, ``backend``, ``quantize``, ``device``).

    Example::

        import babelspace

        result = babelspace.align("book.en.txt", "book.de.txt", model="e5-small",
                                  out="aligned.tsv", src_lang="en", tgt_lang="de")
        print(result.pairs, result.summary["blocks"])
    """
    from babelspace.data.languages import validate_lang
    from babelspace.mining.align import align_files, alignment_summary_path
    from babelspace.mining.align_docs import document_pairs
    from babelspace.mining.align_dp import AlignConfig
    from babelspace.models.backends import validate_backend

    config_fields = _field_names(AlignConfig)
    encoding = {"batch_size", "max_seq_length", "backend", "quantize", "device"}
    _unknown("align", options, config_fields | encoding)
    if out is None:
        raise TypeError("align() needs out: the path of the TSV to write")
    config_given, enc_given = _split(options, config_fields, encoding)
    config = AlignConfig(**config_given)
    enc = _encode_options(enc_given, show_progress, local_only=True)
    validate_backend(enc.backend, enc.quantize)
    documents = document_pairs(src, tgt, pairs, allow_outside_paths=allow_outside_paths)
    if config.method == "embeddings" and model is None:
        raise ModelNeeded("align() with method='embeddings' needs a model; or use method='gale-church'")
    spec = model if model is None or _is_loaded(model) else _model_spec(model, "align")
    summary = align_files(
        documents,
        out,
        spec,
        config,
        enc,
        src_lang=validate_lang(src_lang) if src_lang else None,
        tgt_lang=validate_lang(tgt_lang) if tgt_lang else None,
        skip_bad_lines=skip_bad_lines,
    )
    return AlignResult(Path(out), alignment_summary_path(out), summary)


# ----------------------------------------------------------------------------- export
@dataclass
class ExportResult:
    """What ``babelspace export`` writes and prints: the folder to load, and the backend and file name
    ``SentenceTransformer(folder, backend=..., model_kwargs={"file_name": ...})`` needs (a static
    model: ``backend`` None, loaded as ``SentenceTransformer(folder)``)."""

    folder: Path
    backend: str | None = None
    file_name: str | None = None
    token_vectors: int | None = None  # a static model: its number of token vectors

    def load_call(self) -> str:
        """The ``SentenceTransformer(...)`` call that loads the export with sentence-transformers alone."""
        if self.backend is None:
            return f"SentenceTransformer({str(self.folder)!r})"
        return (f"SentenceTransformer({str(self.folder)!r}, backend={self.backend!r}, "
                f"model_kwargs={{'file_name': {self.file_name!r}}})")  # fmt: skip

    def __str__(self) -> str:
        if self.backend is None:
            head = f"wrote a static model ({self.token_vectors} token vectors) to {self.folder}"
        else:
            head = f"wrote {self.folder / str(self.file_name)}"
        return f"{head}\nload it with sentence-transformers alone:\n  {self.load_call()}"


def export(
    model: Any,
    out: PathLike | None = None,
    backend: str | None = None,
    static: bool = False,
    *,
    quantize: str = "none",
    static_vocab_from: list[PathLike] | None = None,
    static_vocab: int | None = None,
    static_fit: int = 5000,
    static_weighting: str = "zipf",
    device: str = "auto",
) -> ExportResult:
    """Export ``model`` as ``babelspace export`` does: ONNX or OpenVINO files (``backend``, optionally
    ``quantize="int8"``) written into the model's folder or a copy of it at ``out``; or (``static=True``)
    a static token-vector model distilled from it into the new folder ``out``.

    ``static_vocab_from``: one-sentence-per-line files whose tokens are distilled (default: the whole
    vocabulary); ``static_vocab``: at most this many tokens; ``static_fit``: sentences of those files
    for the linear map onto the model's pooled vectors (0: none); ``static_weighting``: ``"zipf"`` or
    ``"none"``. A loaded model can only be exported static (a backend export needs its folder).

    Example::

        import babelspace

        babelspace.export("runs/de", backend="onnx", quantize="int8", out="runs/de-onnx")
        fast = babelspace.export("runs/de", out="runs/de-static", static=True,
                                 static_vocab_from=["sentences.txt"])
        print(fast.load_call())
    """
    from babelspace.writable import check_output

    if static == (backend is not None):
        raise ValueError("export() needs backend='onnx'|'openvino' or static=True (one of the two)")
    out = Path(out) if out is not None else None
    if static:
        return _export_static(model, out, quantize, static_vocab_from, static_vocab, static_fit,
                              static_weighting, device)  # fmt: skip
    if _is_loaded(model):
        raise TypeError("export(backend=...) needs the model's name or folder, not a loaded model")
    spec = _model_spec(model, "export")
    from babelspace.models.backends import export_backend

    if out is not None and not (Path(spec).is_dir() and out.resolve() == Path(spec).resolve()):
        check_output(out, "--out", models=[("MODEL", spec)], folder=True)
    folder, file_name = export_backend(spec, backend, quantize, out=out)
    return ExportResult(folder, backend, file_name)


def _export_static(
    model: Any,
    out: Path | None,
    quantize: str,
    vocab_from: list[PathLike] | None,
    vocab: int | None,
    fit: int,
    weighting: str,
    device: str,
) -> ExportResult:
    import random

    from babelspace.errors import BabelspaceError, CorpusFormatError
    from babelspace.writable import check_output

    if out is None:
        raise ValueError("export(static=True) needs out: a new folder for the static model")
    if quantize != "none":
        raise ValueError("export(): quantize applies to backend exports, not to static=True")
    files = [Path(f) for f in vocab_from or []]
    loaded = model if _is_loaded(model) else None
    spec = None if loaded is not None else _model_spec(model, "export")
    check_output(out, "--out", inputs=[("--static-vocab-from", f) for f in files],
                 models=[("MODEL", spec)] if spec else [], folder=True)  # fmt: skip
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise BabelspaceError(f"--out {out} exists and is not an empty folder: give a new folder")
    from babelspace.mining.corpus import read_sentences
    from babelspace.models.encoder import load_encoder
    from babelspace.models.static import check_against_parent, distil_static, distilled_tokens, static_card
    from babelspace.training.output.model_card import base_model_id

    texts: list[str] | None = None
    if files:
        texts = []
        for f in files:
            try:
                texts += read_sentences(f, ids=False).texts
            except CorpusFormatError as exc:
                raise BabelspaceError(f"--static-vocab-from {exc}") from None
    parent = loaded if loaded is not None else load_encoder(spec, device=device)
    sample = None
    if texts:
        sample = texts if len(texts) <= fit else random.Random(0).sample(texts, fit)
    static = distil_static(parent, vocab_size=vocab, texts=texts, fit_texts=sample, weighting=weighting)
    fitted = set(sample or [])
    held_out = sorted({t for t in texts or [] if t not in fitted})
    if len(held_out) > STATIC_CHECK_SENTENCES:
        held_out = random.Random(0).sample(held_out, STATIC_CHECK_SENTENCES)
    check = check_against_parent(static, parent, held_out) if len(held_out) >= 2 else None
    name = spec if spec is not None else _loaded_name(model)
    card = static_card(
        str(name), static, weighting=weighting, vocab_files=[str(f) for f in files], fit_sentences=len(sample or []),
        check=check, base_model=base_model_id(str(name)), model_id=str(out),
    )  # fmt: skip
    _save_new_folder(static, out, card)
    return ExportResult(out, None, None, distilled_tokens(static))


#: Sentences of the vocabulary files, not used by the fit, on which a static model is compared with
#: its parent at export (speed and agreement, written to its card).
STATIC_CHECK_SENTENCES = 200


def _save_new_folder(model: Any, out: Path, card: str | None = None) -> None:
    """Save into a temporary sibling folder, then rename it to ``out`` (no half-written model). The
    sibling is made with ``mkdir``, so the folder gets the user's usual permissions (its umask), not
    the owner-only mode ``tempfile.mkdtemp`` gives."""
    import secrets
    import shutil

    out.parent.mkdir(parents=True, exist_ok=True)
    while True:
        tmp = out.parent / f".{out.name}.new-{secrets.token_hex(4)}"
        try:
            tmp.mkdir()
            break
        except FileExistsError:
            continue
    try:
        model.save(str(tmp))
        if card is not None:
            (tmp / "README.md").write_text(card, encoding="utf-8")  # in place of the generic card
        if out.exists():
            out.rmdir()  # checked empty above
        tmp.rename(out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
