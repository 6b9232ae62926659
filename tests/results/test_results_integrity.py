"""Results files read back (compare, report, gates, calibrate all read them through ``from_json``): numbers that
Evret cannot have written are refused naming the file, the query and the metric, never shown or gated on
(red-team 2026-11-24: F10, X-pqnan, X-pqhuge, X-mean-rep, X-qidmismatch, X-badint)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from evret_core.contracts.errors import EvretError
from evret_core.results.evaluation import EvaluationResults, metric_value_range
from evret_core.results.gates import check_fail_under, check_regression
from evret_core.results.model import ScoreView

from .._paths import REPO


def _write(tmp_path: Path, results: EvaluationResults, edit: Any, name: str = "edited.json") -> Path:
    data = json.loads(results.to_json() or "")
    edit(data)
    path = tmp_path / name
    path.write_text(json.dumps(data))  # json writes NaN and inf as the bare words NaN / Infinity, as a hand edit
    return path


def _set_query(metric: str, value: float, qid: str | None = None) -> Any:
    def edit(data: dict[str, Any]) -> None:
        for key in [qid] if qid else list(data["per_query"]):
            data["per_query"][key]["scores"][metric] = value
    return edit


def test_a_file_written_now_and_a_version_1_file_still_load(good_results: EvaluationResults, tmp_path: Path) -> None:
    path = tmp_path / "now.json"
    good_results.to_json(path)
    assert EvaluationResults.from_json(path).scores == good_results.scores

    def to_v1(data: dict[str, Any]) -> None:
        for key in ("intervals", "slices", "manifest", "confidence_level", "prediction_powered"):
            data.pop(key, None)
        data["schema_version"] = 1

    assert EvaluationResults.from_json(_write(tmp_path, good_results, to_v1)).scores == good_results.scores


@pytest.mark.parametrize(("value", "shown"), [
    (float("nan"), "recall@5 is nan, not a finite number"),
    (float("inf"), "recall@5 is inf, not a finite number"),
    (1e308, "recall@5 is 1e+308, outside [0, 1], the range of recall@5"),
    (-0.5, "recall@5 is -0.5, outside [0, 1]"),
])
def test_a_per_query_score_out_of_range_names_file_query_and_metric(
    good_results: EvaluationResults, tmp_path: Path, value: float, shown: str
) -> None:
    first = next(iter(good_results.per_query))
    path = _write(tmp_path, good_results, _set_query("recall@5", value, first))
    with pytest.raises(EvretError, match=re.escape(f"edited.json: query '{first}': {shown}")):
        EvaluationResults.from_json(path)


def test_counts_have_a_range_and_a_plugin_metric_without_one_is_only_checked_finite() -> None:
    assert metric_value_range("ndcg@10(gain=exponential)") == (0.0, 1.0)
    assert metric_value_range("num_ret") == (0.0, float(2**53))
    assert metric_value_range("not_a_metric@3") is None


def test_a_hand_edited_mean_names_both_values(good_results: EvaluationResults, tmp_path: Path) -> None:
    path = _write(tmp_path, good_results, lambda d: d["scores"].__setitem__("recall@5", 0.99))
    mean = good_results.scores["recall@5"]
    with pytest.raises(EvretError, match=re.escape(f"scores.recall@5 is 0.99 but the mean of its 22 per-query "
                                                   f"values is {mean!r}")):
        EvaluationResults.from_json(path)


def test_a_query_lacking_a_metric_counts_as_zero_or_is_left_out(good_results: EvaluationResults,
                                                                tmp_path: Path) -> None:
    # the mean over the queries that have the metric, or with the missing ones at 0: both are what a writer means
    missed = next(q for q, scores in good_results.per_query_scores().items() if scores["hit_rate@1"] == 0.0)
    path = _write(tmp_path, good_results, lambda d: d["per_query"][missed]["scores"].pop("hit_rate@1"))
    assert EvaluationResults.from_json(path).scores["hit_rate@1"] == good_results.scores["hit_rate@1"]
    hit = next(q for q, scores in good_results.per_query_scores().items() if scores["hit_rate@1"] == 1.0)
    path = _write(tmp_path, good_results, lambda d: d["per_query"][hit]["scores"].pop("hit_rate@1"))
    with pytest.raises(EvretError, match="scores.hit_rate@1 is .* but the mean of its 21 per-query values"):
        EvaluationResults.from_json(path)


def test_a_per_query_key_holding_another_query_is_refused(good_results: EvaluationResults, tmp_path: Path) -> None:
    first = next(iter(good_results.per_query))
    path = _write(tmp_path, good_results, lambda d: d["per_query"][first].__setitem__("query_id", "other"))
    with pytest.raises(EvretError, match=rf"per_query key '{first}' holds the record of query 'other'"):
        EvaluationResults.from_json(path)


@pytest.mark.parametrize("interval", [[2, -1], [0.9, 0.8], [0.1, float("nan")], [0.1], [-3.0, 0.5]])
def test_a_bad_interval_is_refused(good_results: EvaluationResults, tmp_path: Path, interval: list[float]) -> None:
    path = _write(tmp_path, good_results, lambda d: d["intervals"].__setitem__("recall@5", interval))
    with pytest.raises(EvretError, match=r"edited.json: intervals.recall@5"):
        EvaluationResults.from_json(path)


def test_a_slice_score_out_of_range_is_refused(good_results: EvaluationResults, tmp_path: Path) -> None:
    def edit(data: dict[str, Any]) -> None:
        tag = next(iter(data["slices"]))
        value = next(iter(data["slices"][tag]))
        data["slices"][tag][value]["scores"]["mrr@10"] = 7.0

    with pytest.raises(EvretError, match=r"edited.json: slices\.\w+\.\w+\.scores: mrr@10 is 7.0, outside \[0, 1\]"):
        EvaluationResults.from_json(_write(tmp_path, good_results, edit))


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-W", "error", "-m", "evret_core.cli", *args], capture_output=True,
                          text=True, cwd=cwd, timeout=300)


def test_f10_a_nan_baseline_is_bad_input_not_a_passed_gate(good_results: EvaluationResults, tmp_path: Path) -> None:
    base = _write(tmp_path, good_results, _set_query("recall@5", float("nan")), "nanbase.json")
    proc = _cli("evaluate", "--config", str(REPO / "examples" / "eval.toml"), "--baseline", str(base),
                "--no-progress", cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.strip().splitlines() == [
        f"evret: error: {base}: query '{next(iter(good_results.per_query))}': recall@5 is nan, not a finite number; "
        f"the file was edited or damaged (re-run the evaluation)"]
    assert "gates passed" not in proc.stdout + proc.stderr


@pytest.mark.parametrize("value", [float("nan"), 1e308])
def test_compare_refuses_nan_and_huge_scores_without_numpy_warnings(
    good_results: EvaluationResults, tmp_path: Path, value: float
) -> None:
    a = tmp_path / "a.json"
    good_results.to_json(a)
    b = _write(tmp_path, good_results, _set_query("recall@5", value), "b.json")
    proc = _cli("compare", str(a), str(b), cwd=tmp_path)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "b.json: query" in proc.stderr and "RuntimeWarning" not in proc.stderr
    assert "nan" not in proc.stdout and "inf" not in proc.stdout


# -- the gates themselves: never a pass on NaN, whatever built the run -------------------------------------------
def _flat(values: list[float]) -> ScoreView:
    per_query = {f"q{i}": {"m": v} for i, v in enumerate(values)}
    return ScoreView({"m": sum(values) / len(values)}, {}, per_query)


def test_regression_gate_on_nan_scores_is_an_error_not_a_pass() -> None:
    good = _flat([1.0, 1.0, 0.0, 1.0])
    nan = _flat([float("nan")] * 4)
    with pytest.raises(EvretError, match=r"the baseline: query 'q0' has m = nan \(4 such value\(s\)\)"):
        check_regression(good, nan)
    with pytest.raises(EvretError, match=r"the run: query 'q0' has m = nan"):
        check_regression(nan, good)


def test_floor_on_a_nan_mean_is_an_error() -> None:
    run = ScoreView({"m": float("nan")}, {}, {"q0": {"m": 0.5}})
    with pytest.raises(EvretError, match=r"the run's m is nan; a floor needs a finite score"):
        check_fail_under(run, {"m": 0.5})
