"""Dev evaluation during training: translation accuracy both ways in the student's own space and,
with a teacher, MSE to the teacher (paper reduction) and accuracy of student xx -> teacher en."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from sentence_transformers import SentenceTransformer

from babelspace.data.pairs import ParallelPair
from babelspace.metrics.tatoeba import top1_accuracy
from babelspace.models.encoder import encode
from babelspace.models.output_map import OutputMap


def evaluate_dev(
    student: SentenceTransformer,
    dev: Sequence[ParallelPair],
    teacher_vectors: np.ndarray | None,
    batch_size: int = 64,
    output_map: OutputMap | None = None,
) -> dict[str, float]:
    """``dev_score`` is the mean of the accuracies. ``output_map`` is applied to the student's raw
    vectors first: a student trained in the mean-centred teacher space is exported with the
    teacher's mean added back (:class:`OutputMap`), and is judged here in that same (the teacher's
    raw) space."""
    was_training = student.training
    student.eval()
    try:
        src = encode(student, [p.src for p in dev], batch_size=batch_size, normalize=False)
        tgt = encode(student, [p.tgt for p in dev], batch_size=batch_size, normalize=False)
    finally:
        student.train(was_training)
    if output_map is not None:
        src, tgt = output_map.apply(src), output_map.apply(tgt)
    out = {
        "dev_acc_xx_en": top1_accuracy(tgt, src),
        "dev_acc_en_xx": top1_accuracy(src, tgt),
    }
    if teacher_vectors is not None:
        out["dev_mse"] = float(
            (((src - teacher_vectors) ** 2).sum(1) + ((tgt - teacher_vectors) ** 2).sum(1)).mean()
        )
        out["dev_acc_xx_teacher_en"] = top1_accuracy(tgt, teacher_vectors)
    accs = [v for k, v in out.items() if k.startswith("dev_acc")]
    out["dev_score"] = float(np.mean(accs))
    return out


def format_metrics(metrics: dict[str, float]) -> str:
    """``name=value`` pairs for a log line (3 decimals)."""
    return ", ".join(f"{k}={v:.3f}" for k, v in metrics.items())
