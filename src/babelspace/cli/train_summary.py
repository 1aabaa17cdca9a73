"""The block ``babelspace train`` prints at the end of a run: where the model is, its dev scores, the
data, the held-out table and where the time went."""

from __future__ import annotations

import sys
from typing import Any

from babelspace.training.config import TrainConfig


def peak_rss_mb() -> float | None:
    """This process's peak resident memory in MB, where the platform has ``resource`` (not Windows)."""
    try:
        import resource
    except ImportError:
        return None
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def print_summary(cfg: TrainConfig, result: Any, rows: list[dict] | None, total: float) -> None:
    """One block at the end of a run: where the model is, its dev scores, data, the held-out table,
    where the time went."""
    from babelspace.evaluation.held_out import DROP_IN_COSINE
    from babelspace.evaluation.report import format_table
    from babelspace.training.output.final_table import tuned_space

    out = sys.stdout
    which = "final" if cfg.model_from == "final" else "best"
    print(f"\nsaved {which} model (step {result.best_step}) to {result.output}", file=out)
    dev = ", ".join(f"{k}={v:.3f}" for k, v in result.best_dev.items())
    print(f"dev at {which} step: " + (dev or "none (--dev-pairs 0: no dev set, no dev check)"), file=out)
    for line in result.data_report:
        print("data: " + line, file=out)
    if getattr(result, "own_data", False):
        print(
            f"data: the run saw {100 * result.epoch_share:.3g}% of one epoch ({result.steps} steps x "
            f"{cfg.pairs_per_step} pairs of {result.train_pairs} training pairs)",
            file=out,
        )
    counts = ", ".join(f"{k} {v}" for k, v in result.counts.items() if v)
    if counts:
        print("counts: " + counts, file=out)
    if rows:
        print(
            f"\nHeld-out Bible test books ({cfg.test_sentences} verses per language), top-1 accuracy %:",
            file=out,
        )
        print(format_table(rows, columns=list(rows[0].keys())), file=out)
        print(f"tuned for: {tuned_space(cfg)}", file=out)
        cosine = next((r.get(DROP_IN_COSINE) for r in rows if r.get("lang") == "mean"), None)
        if cosine is not None:
            print(
                f"drop-in cosine: {cosine:.3f} (mean cosine of this model's and the teacher's vector of the same "
                "English test verse; 1.0 would be the teacher itself)",
                file=out,
            )
    peak = peak_rss_mb()
    timings = ", ".join(f"{k} {v:.1f}s" for k, v in result.timings.items())
    print(
        f"\ntime: {timings}; total {total:.1f}s; training {result.pairs_per_second:.1f} pairs/s on "
        f"{result.device} ({result.precision})"
        + (f"; peak RSS {peak:.0f} MB" if peak is not None else "")
        + (
            f"; peak GPU memory {result.peak_device_memory_mb:.0f} MB" if result.peak_device_memory_mb else ""
        ),
        file=out,
    )
