"""Agreement measures, baselines, threshold sweep and calibration of real judges on labelled judgments."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from evret_core.calibration import agreement, calibrate, calibrate_judge, read_labels, threshold_sweep
from evret_core.calibration.agreement import best_threshold, measures_from_counts
from evret_core.calibration.labels import LabelledJudgment
from evret_core.contracts.errors import EvretError
from evret_core.contracts.judge import JudgmentContext
from evret_core.judge.lexical import TokenOverlapJudge
from evret_core.judge.thresholds import judge_scores, judge_threshold


def test_measures_match_hand_computed_values() -> None:
    m = {k: float(v) for k, v in measures_from_counts(20, 5, 10, 65).items()}
    assert m["accuracy"] == pytest.approx(0.85)
    assert m["precision"] == pytest.approx(0.8)
    assert m["recall"] == pytest.approx(20 / 30)
    assert m["f1"] == pytest.approx(40 / 55)
    pe = (25 * 30 + 75 * 70) / 100**2
    assert m["kappa"] == pytest.approx((0.85 - pe) / (1 - pe))


def test_trivial_baselines_have_zero_kappa_and_degenerate_cases_are_defined() -> None:
    truth = np.array([True, False, False, True, False])
    yes = agreement(np.ones(5, bool), truth)
    no = agreement(np.zeros(5, bool), truth)
    assert yes.kappa == 0.0 and no.kappa == 0.0
    assert yes.recall == 1.0 and yes.precision == pytest.approx(0.4)
    assert no.precision == 0.0 and no.f1 == 0.0 and no.accuracy == pytest.approx(0.6)
    same = agreement(np.ones(3, bool), np.ones(3, bool))
    assert same.accuracy == 1.0 and same.kappa == 0.0  # undefined kappa: nothing beyond chance shown


def test_kappa_interval_is_seeded_and_brackets_the_point() -> None:
    rng = np.random.default_rng(0)
    truth = rng.random(400) < 0.3
    predicted = np.where(rng.random(400) < 0.85, truth, ~truth)
    a = agreement(predicted, truth, seed=3)
    b = agreement(predicted, truth, seed=3)
    assert a.kappa_interval == b.kappa_interval
    assert a.kappa_interval[0] < a.kappa < a.kappa_interval[1]
    assert a.confusion["tp"] + a.confusion["fp"] + a.confusion["fn"] + a.confusion["tn"] == 400


def test_sweep_finds_the_separating_threshold() -> None:
    scores = np.array([0.1, 0.2, 0.35, 0.4, 0.6, 0.7, 0.9])
    truth = scores >= 0.4
    sweep = threshold_sweep(scores, truth)
    assert [row["threshold"] for row in sweep] == sorted(scores.tolist())
    best = best_threshold(sweep, "kappa")
    assert best is not None and best["threshold"] == 0.4 and best["kappa"] == 1.0
    with pytest.raises(EvretError, match="'f1' or 'kappa'"):
        best_threshold(sweep, "accuracy")


def _ctx(expected: str, retrieved: str, query: str = "q") -> JudgmentContext:
    return JudgmentContext(query=query, expected_text=expected, retrieved_text=retrieved)


@pytest.mark.parametrize("boost", [True, False])
def test_token_overlap_scores_reproduce_its_verdicts(boost: bool) -> None:
    judge = TokenOverlapJudge(query_boost=boost)
    contexts = [
        _ctx("paris is the capital of france", "france has paris as capital city", "capital of france"),
        _ctx("the eiffel tower in paris", "paris tower views", "eiffel tower"),
        _ctx("rag", "a fragment"), _ctx("rag", "what is rag?"), _ctx("alpha beta gamma delta", "beta gamma"),
        _ctx("alpha beta gamma delta", "alpha beta gamma", "alpha"), _ctx("one", "two"),
    ]
    scores = judge_scores(judge, contexts)
    threshold = judge_threshold(judge)
    assert threshold == 0.6
    assert [s is not None and s >= threshold for s in scores] == judge.batch_judge(contexts)
    assert all(s is not None and 0.0 <= s <= 1.0 for s in scores)


def _write(path: Path, rows: list[object]) -> Path:
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return path


def test_calibrating_token_overlap_on_labels(tmp_path: Path) -> None:
    rows = []
    # matches hold all answer words; near misses hold one of three; and one mislabel-prone case
    for i in range(12):
        rows.append({"query_id": f"a{i}", "expected": f"alpha{i} beta{i} gamma{i}",
                     "retrieved_text": f"text with alpha{i} beta{i} gamma{i} inside", "label": True})
        rows.append({"query_id": f"b{i}", "expected": f"alpha{i} beta{i} gamma{i}",
                     "retrieved_text": f"text with alpha{i} and other words", "label": False})
    rows.append({"query_id": "c", "expected": "red green blue", "retrieved_text": "red green", "label": True})
    rows.append({"query_id": "u", "expected": "x", "retrieved_text": "y", "label": None})
    labels = read_labels(_write(tmp_path / "labels.jsonl", rows))
    assert len(labels) == 26
    result = calibrate_judge("token-overlap", labels, by="kappa", n_resamples=200)
    assert result.agreement.n == 25
    assert result.agreement.confusion == {"tp": 13, "fp": 0, "fn": 0, "tn": 12}
    assert result.beats_baselines
    assert result.baselines["always_yes"].recall == 1.0
    assert result.threshold_option == "overlap_ratio" and result.sweep
    assert result.best is not None and result.best["kappa"] == 1.0
    exact = calibrate(["exact"], labels)[0]
    assert exact.sweep == [] and exact.best is None and exact.agreement.recall == 0.0
    assert not exact.beats_baselines


@pytest.mark.parametrize(("row", "message"), [
    ({"query_id": "q", "expected": "a", "retrieved_text": "b"}, "'label' is missing"),
    ({"query_id": "q", "expected": "a", "retrieved_text": "b", "label": "yes"}, "'label' must be true, false"),
    ({"query_id": "q", "expected": "", "retrieved_text": "b", "label": True}, "'expected' must be a non-empty"),
    ({"query_id": "q", "expected": [], "retrieved_text": "b", "label": True}, "'expected' must be a non-empty"),
    ({"query_id": "q", "expected": "a", "label": True}, "give 'retrieved_text' or a 'doc_id'"),
    ({"query_id": "q", "expected": "a", "doc_id": "d9", "label": True}, "needs a corpus"),
    ({"expected": "a", "retrieved_text": "b", "label": True}, "'query_id' must be"),
    ({"query_id": "q", "expected": "a", "retrieved_text": "b", "label": True, "lable": 1}, "unknown field"),
    ([1, 2], "expected a JSON object"),
])
def test_bad_label_rows_name_file_and_line(tmp_path: Path, row: object, message: str) -> None:
    good = {"query_id": "q0", "expected": "a", "retrieved_text": "b", "label": False}
    path = _write(tmp_path / "l.jsonl", [good, row])
    with pytest.raises(EvretError, match=message) as info:
        read_labels(path)
    assert f"{path}:2:" in str(info.value)


def test_doc_ids_resolve_through_a_corpus_and_aliases_are_alternatives(tmp_path: Path) -> None:
    path = _write(tmp_path / "l.jsonl", [
        {"query_id": "q", "query": "when?", "expected": ["1832", "in 1832"], "doc_id": 7, "label": True},
    ])
    labels = read_labels(path, corpus={"7": {"text": "He died in 1832, aged 23."}})
    assert labels[0].retrieved_text.startswith("He died") and labels[0].expected == ("1832", "in 1832")
    result = calibrate_judge("token-overlap", labels, n_resamples=10)
    assert result.agreement.confusion["tp"] == 1
    with pytest.raises(EvretError, match="'doc_id' '8' is not in the corpus"):
        read_labels(_write(tmp_path / "m.jsonl", [{"query_id": "q", "expected": "a", "doc_id": "8",
                                                     "label": True}]), corpus={})
    assert LabelledJudgment("q", "", ("a",), "b", None).to_record()["label"] is None
