"""The whole ``babelspace mine`` pipeline (:func:`mine_files`): read and clean both files, encode them to
shards in a work directory (resumable), mine (:func:`babelspace.mining.threshold.mine_embeddings`:
search, score, select, threshold), and write ``score<TAB>src<TAB>tgt`` plus a JSON summary.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from babelspace.mining.core import MiningConfig, MiningResult, peak_rss_bytes
from babelspace.mining.corpus import DEFAULT_MAX_CHARS, SentenceFile, read_sentences
from babelspace.mining.encode import EncodeOptions, encode_to_shards
from babelspace.mining.guards import check_output_paths, shard_identity
from babelspace.mining.threshold import gold_vectors, mine_embeddings, warn_if_tiny_share
from babelspace.vectors.shards import ShardStore
from babelspace.writable import atomic_open, write_json

__all__ = ["mine_files", "summary_path"]

logger = logging.getLogger(__name__)


def summary_path(out: str | Path) -> Path:
    """``PAIRS.tsv`` -> ``PAIRS.summary.json`` (next to the output)."""
    out = Path(out)
    return out.with_name(out.stem + ".summary.json")


def _write_pairs(out: Path, result: MiningResult, src: SentenceFile, tgt: SentenceFile) -> None:
    with_ids = src.has_ids or tgt.has_ids
    out.parent.mkdir(parents=True, exist_ok=True)
    p = result.pairs
    with atomic_open(out) as fh:
        for s, t, score in zip(p.src.tolist(), p.tgt.tolist(), p.scores.tolist(), strict=True):
            if with_ids:
                fh.write(f"{score:.6f}\t{src.id_of(s)}\t{tgt.id_of(t)}\t{src.texts[s]}\t{tgt.texts[t]}\n")
            else:
                fh.write(f"{score:.6f}\t{src.texts[s]}\t{tgt.texts[t]}\n")


def mine_files(
    src_path: str | Path,
    tgt_path: str | Path,
    out: str | Path,
    model: str,
    config: MiningConfig | None = None,
    encode_options: EncodeOptions | None = None,
    *,
    workdir: str | Path | None = None,
    ids: bool | None = None,
    max_chars: int = DEFAULT_MAX_CHARS,
    skip_bad_lines: bool = False,
) -> dict[str, Any]:
    """The ``babelspace mine`` pipeline. Returns the summary (also written to :func:`summary_path`).

    Embeddings go to ``workdir/src`` and ``workdir/tgt`` (default: ``OUT.work`` next to the output);
    rerunning the same command reuses every finished shard.
    """
    config = config or MiningConfig()
    enc = encode_options or EncodeOptions()
    out = Path(out)
    workdir = Path(workdir) if workdir is not None else out.with_name(out.stem + ".work")
    check_output_paths(
        out,
        workdir,
        side_files=[("--out's summary", summary_path(out))],
        inputs=[("--src", src_path), ("--tgt", tgt_path)],
        models=[("--model", model)],
    )
    t_start = time.perf_counter()
    timings: dict[str, float] = {}

    with _timed(timings, "read_s"):
        src = read_sentences(src_path, ids=ids, max_chars=max_chars, skip_bad_lines=skip_bad_lines)
        tgt = read_sentences(tgt_path, ids=ids, max_chars=max_chars, skip_bad_lines=skip_bad_lines)
    with _timed(timings, "encode_s"):
        identity = shard_identity(model, enc.backend, enc.quantize)
        loaded = _encoder_if_needed(model, identity, enc, config, workdir, src, tgt)
        stores, encoding = _encode_sides(model, identity, enc, workdir, src, tgt, loaded)
    gold = _gold_vectors(config, loaded, enc, timings)
    del loaded  # the encoder's memory is free before the search

    result = mine_embeddings(stores["src"], stores["tgt"], config, gold)
    timings.update(result.timings)
    if result.calibration is None:
        kept_share = warn_if_tiny_share(len(result.pairs), result.n_one_to_one, result.threshold)
    else:  # a small share is what a precise threshold keeps from mostly unrelated text
        kept_share = len(result.pairs) / result.n_one_to_one if result.n_one_to_one else 0.0
    with _timed(timings, "write_s"):
        _write_pairs(out, result, src, tgt)
    timings["total_s"] = time.perf_counter() - t_start

    summary = {
        "output": str(out),
        "src": _side_summary(src_path, src),
        "tgt": _side_summary(tgt_path, tgt),
        **_encoding_summary(model, identity, enc, workdir, stores, encoding),
        **_selection_summary(config, result, kept_share),
        "timings_s": {k: round(v, 3) for k, v in timings.items()},
        "peak_rss_bytes": peak_rss_bytes(),
        "peak_rss_children_bytes": peak_rss_bytes(children=True),
    }
    path = summary_path(out)
    write_json(path, summary)
    logger.info("mined %d pairs -> %s (summary %s)", len(result.pairs), out, path)
    return summary


def _side_summary(path: str | Path, f: SentenceFile) -> dict[str, Any]:
    """One input's summary fields: path, whether it has ids (and whether they were detected), counts."""
    return {"path": str(path), "ids": f.has_ids, "ids_detected": f.ids_detected, **f.stats.to_dict()}


@contextmanager
def _timed(timings: dict[str, float], key: str) -> Iterator[None]:
    """Record the block's wall time as ``timings[key]`` (seconds; not recorded if the block raises)."""
    t0 = time.perf_counter()
    yield
    timings[key] = time.perf_counter() - t0


def _encoder_if_needed(
    model: str,
    identity: str,
    enc: EncodeOptions,
    config: MiningConfig,
    workdir: Path,
    src: SentenceFile,
    tgt: SentenceFile,
) -> Any:
    """The loaded encoder, or None when nothing needs it in this process.

    The local executor needs it unless both shard stores are complete; ``--check-recall`` always needs
    it (known pairs are encoded for the recall estimate).
    """
    needs_gold = _wants_recall(config)
    if enc.executor != "local" and not needs_gold:
        return None
    stores_ready = all(
        _store_ready(ShardStore(workdir / side), f, identity, enc) for side, f in (("src", src), ("tgt", tgt))
    )
    if stores_ready and not needs_gold:
        return None
    from babelspace.models.backends import load_backend_encoder

    return load_backend_encoder(
        model, enc.backend, enc.quantize, device=enc.device, max_seq_length=enc.max_seq_length
    )


def _encode_sides(
    model: str,
    identity: str,
    enc: EncodeOptions,
    workdir: Path,
    src: SentenceFile,
    tgt: SentenceFile,
    loaded: Any,
) -> tuple[dict[str, ShardStore], dict[str, Any]]:
    """Encode (or resume) both sides into ``workdir/src`` and ``workdir/tgt``: stores and their reports."""
    encoding = {}
    stores = {}
    for side, f in (("src", src), ("tgt", tgt)):
        store = ShardStore(workdir / side)
        encoding[side] = encode_to_shards(
            f.texts,
            store,
            model,
            f.fingerprint,
            enc,
            model=loaded if enc.executor == "local" else None,
            desc=f"encode {side}",
            identity=identity,
        )
        stores[side] = store
    return stores, encoding


def _wants_recall(config: MiningConfig) -> bool:
    """Whether the run estimates recall on known Bible pairs: only when asked (``--check-recall``)."""
    return config.check_recall and config.threshold == "auto" and bool(config.src_lang and config.tgt_lang)


def _gold_vectors(
    config: MiningConfig, loaded: Any, enc: EncodeOptions, timings: dict[str, float]
) -> tuple[np.ndarray, np.ndarray] | None:
    """Known-pair vectors for ``--check-recall``'s recall estimate (timed as ``gold_s``), or None."""
    if not _wants_recall(config) or loaded is None:
        return None
    with _timed(timings, "gold_s"):
        return gold_vectors(loaded, config.src_lang, config.tgt_lang, enc.batch_size)


def _encoding_summary(
    model: str,
    identity: str,
    enc: EncodeOptions,
    workdir: Path,
    stores: dict[str, ShardStore],
    encoding: dict[str, Any],
) -> dict[str, Any]:
    """The summary's model and encoding fields."""
    return {
        "model": model,
        "model_identity": identity,
        "dim": stores["src"].dim,
        "dtype": enc.dtype,
        "shard_size": enc.shard_size,
        "workdir": str(workdir),
        "encoding": encoding,
        "executor": enc.executor,
        "workers": enc.workers,
    }


def _selection_summary(config: MiningConfig, result: MiningResult, kept_share: float) -> dict[str, Any]:
    """The summary's search, threshold and count fields."""
    cal = result.calibration
    return {
        "src_lang": config.src_lang,
        "tgt_lang": config.tgt_lang,
        "k": result.k,
        "k_requested": config.k,
        "margin": str(config.margin),
        "retrieval": config.retrieval,
        "index": config.index,
        "nprobe": config.nprobe if config.index != "flat" else None,
        "threshold": result.threshold,
        "threshold_source": cal.describe() if cal else "given",
        "calibration": cal.to_dict() if cal else None,
        # the precision estimate and what it is: "point" (the interval lies within 0.10 of it) or "interval"
        "precision_estimate": cal.precision_estimate if cal else None,
        "precision_kind": cal.precision_kind if cal else None,
        "precision_interval": [cal.precision_low, cal.precision_high] if cal else None,
        "estimated_recall": cal.recall if cal else None,
        "kept_share": round(kept_share, 4),
        "candidates": result.n_candidates,
        "one_to_one": result.n_one_to_one,
        "pairs": len(result.pairs),
        "max_memory_bytes": config.max_memory,
        "plans": {k: asdict(v) for k, v in result.plans.items()},
    }


def _store_ready(store: ShardStore, f: SentenceFile, identity: str, enc: EncodeOptions) -> bool:
    m = store.read_manifest()
    if m is None:
        return False
    same = (m.model, m.n, m.fingerprint, m.dtype, m.shard_size) == (
        identity,
        len(f),
        f.fingerprint,
        enc.dtype,
        enc.shard_size,
    )
    return same and not store.missing_shards()
