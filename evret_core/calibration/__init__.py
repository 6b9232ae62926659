"""Judge calibration against labels, a stratified labelling planner, and prediction-powered intervals.

See docs/calibration.md. Nothing heavy is imported here.
"""

from evret_core.calibration.agreement import Agreement, agreement, best_threshold, threshold_sweep
from evret_core.calibration.calibrate import JudgeCalibration, calibrate, calibrate_judge, calibration_json
from evret_core.calibration.label_plan import (
    candidates_from_results,
    labels_from_results,
    plan_sample,
    write_plan,
)
from evret_core.calibration.labels import LabelledJudgment, derive_labels, read_labels
from evret_core.calibration.ppi import PPIEstimate, add_prediction_powered, ppi_for_results, ppi_mean

__all__ = [
    "Agreement",
    "JudgeCalibration",
    "LabelledJudgment",
    "PPIEstimate",
    "add_prediction_powered",
    "agreement",
    "best_threshold",
    "calibrate",
    "calibrate_judge",
    "calibration_json",
    "candidates_from_results",
    "derive_labels",
    "labels_from_results",
    "plan_sample",
    "ppi_for_results",
    "ppi_mean",
    "read_labels",
    "threshold_sweep",
    "write_plan",
]
