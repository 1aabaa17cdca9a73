"""Evaluation tasks as plain functions on numpy arrays (one module per task).

``knn`` holds the single kNN / margin implementation shared with mining. The sentence-transformers
evaluators live in :mod:`babelspace.evaluation.st_evaluators` and the figures in
:mod:`babelspace.evaluation.plots`; neither is imported here, to keep this import light.
"""

from babelspace.evaluation.bucc import (
    BuccCandidates,
    BuccResult,
    BuccSplit,
    BuccTask,
    OptimisticBuccResult,
    apply_threshold,
    bucc_eval,
    build_bucc_task,
    mine_candidates,
    optimistic_f1,
    read_bucc,
    tune_threshold,
)
from babelspace.evaluation.knn import Margin, knn_search, l2_normalize, margin_knn, margin_score, mean_knn_sim
from babelspace.evaluation.mse import MseResult, elementwise_mse_x100, mean_squared_l2, mse_to_teacher
from babelspace.evaluation.report import format_table, write_json
from babelspace.evaluation.sts import StsData, language_bias, read_sts17, read_stsb, sts_spearman
from babelspace.evaluation.tatoeba import TatoebaResult, read_tatoeba_dir, tatoeba_accuracy
from babelspace.evaluation.xsim import XsimResult, xsim_both_directions, xsim_errors, xsim_multi
from babelspace.evaluation.xsimpp import (
    HardNegative,
    XsimppResult,
    generate_hard_negatives,
    read_xsimpp_files,
    xsimpp_errors,
)

__all__ = [
    "BuccCandidates",
    "BuccResult",
    "BuccSplit",
    "BuccTask",
    "HardNegative",
    "Margin",
    "MseResult",
    "OptimisticBuccResult",
    "StsData",
    "TatoebaResult",
    "XsimResult",
    "XsimppResult",
    "apply_threshold",
    "bucc_eval",
    "build_bucc_task",
    "elementwise_mse_x100",
    "format_table",
    "generate_hard_negatives",
    "knn_search",
    "l2_normalize",
    "language_bias",
    "margin_knn",
    "margin_score",
    "mean_knn_sim",
    "mean_squared_l2",
    "mine_candidates",
    "mse_to_teacher",
    "optimistic_f1",
    "read_bucc",
    "read_sts17",
    "read_stsb",
    "read_tatoeba_dir",
    "read_xsimpp_files",
    "sts_spearman",
    "tatoeba_accuracy",
    "tune_threshold",
    "write_json",
    "xsim_both_directions",
    "xsim_errors",
    "xsim_multi",
    "xsimpp_errors",
]
