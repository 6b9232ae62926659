"""The terminal tables of ``evret calibrate``."""

from __future__ import annotations

from typing import Any

_COLUMNS = ("accuracy", "precision", "recall", "f1", "kappa")


def _row(label: str, a: dict[str, Any]) -> str:
    low, high = a["kappa_interval"]
    cells = "".join(f"{a[c]:>10.3f}" for c in _COLUMNS)
    return f"  {label:<14}{cells}   [{low:.3f}, {high:.3f}]"


def format_calibration(document: dict[str, Any]) -> str:
    """The calibration JSON (:func:`~evret_core.calibration.calibrate.calibration_json`) as text tables."""
    labels = document["labels"]
    lines = [f"{labels['labelled']} labelled judgments ({labels['positive']} matches)"
             + (f", {labels['unlabelled']} rows without a label skipped" if labels["unlabelled"] else "")]
    for j in document["judges"]:
        a = j["agreement"]
        lines.append("")
        lines.append(f"judge {j['judge']}: {a['n']} judged" + (f", {j['unmeasured']} unmeasured"
                                                               if j["unmeasured"] else ""))
        lines.append("  " + " " * 14 + "".join(f"{c:>10}" for c in _COLUMNS) + "   kappa interval")
        lines.append(_row(j["judge"], a))
        for name, baseline in j["baselines"].items():
            lines.append(_row(name.replace("_", " "), baseline))
        c = a["confusion"]
        lines.append(f"  confusion: {c['tp']} true matches, {c['fp']} false matches, {c['fn']} missed, "
                     f"{c['tn']} true non-matches")
        if not j["beats_baselines"]:
            lines.append("  WARNING: this judge does not beat the trivial baselines on kappa and F1")
        if j["best"] is not None:
            best = j["best"]
            lines.append(f"  threshold ({j['threshold_option']}): now {j['threshold']:.3f}; best by {j['best_by']} "
                         f"{best['threshold']:.3f} (F1 {best['f1']:.3f}, kappa {best['kappa']:.3f}, "
                         f"{len(j['sweep'])} thresholds tried)")
    saved = document.get("saved")
    if saved:
        lines.append("")
        if saved.get("kept"):
            lines.append(f"kept {saved['option']} = {saved['value']!r} for judge {saved['judge']} in {saved['path']}: "
                         f"it scores as well as the best threshold")
        else:
            lines.append(f"saved {saved['option']} = {saved['value']!r} for judge {saved['judge']} in "
                         f"{saved['path']}")
    return "\n".join(lines)


def print_calibration(document: dict[str, Any]) -> None:
    print(format_calibration(document))
