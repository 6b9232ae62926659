"""Every measure trec_eval prints that Evret claims, reproduced to the printed 4 decimals on trec_eval's own tests."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest

from evret_core import evaluate_rankings, evaluate_run, read_qrels, read_run
from evret_core.io.trec import ranked_docs

_spec = importlib.util.spec_from_file_location("trec_eval_output", Path(__file__).parents[1] / "trec_eval_output.py")
assert _spec and _spec.loader
trec_eval_output = importlib.util.module_from_spec(_spec)
sys.modules["trec_eval_output"] = trec_eval_output
_spec.loader.exec_module(trec_eval_output)
COUNTS, evret_name, parse_output, shared_dir = (
    trec_eval_output.COUNTS, trec_eval_output.evret_name, trec_eval_output.parse_output, trec_eval_output.shared_dir,
)

# (expected output, qrels, run, options): the four configurations and every file that exercises them
CASES = [
    ("out.test", "qrels.test", "results.test", {}),
    ("out.test.a", "qrels.test", "results.test", {}),
    ("out.test.aq", "qrels.test", "results.test", {}),
    ("out.test.cuts.q", "qrels.test", "results.test", {}),
    ("out.comment.test", "qrels.comment.test", "results.comment.test", {}),
    ("out.comment.test.aq", "qrels.comment.test", "results.comment.test", {}),
    ("out.comment.test.cuts.q", "qrels.comment.test", "results.comment.test", {}),
    ("out.test.aql", "qrels.rel_level", "results.test", {"relevance_level": 2}),
    ("out.test.aqc", "qrels.test", "results.trunc", {"complete": True}),
]


def _mismatches(expected: dict[str, dict[str, str]], per_query: dict[str, dict[str, float]]) -> tuple[list[str], int]:
    """Every (query or all, measure) whose value differs from trec_eval's print, and how many were compared."""
    bad: list[str] = []
    checked = 0
    n = len(per_query)
    for qid, values in expected.items():
        for measure, want in values.items():
            name = evret_name(measure)
            if name is None:
                continue
            if qid == "all":
                column = [row[name] for row in per_query.values()]
                got = sum(column) if measure in COUNTS else sum(column) / n
            else:
                got = per_query[qid][name]
            text = f"{got:.0f}" if measure in COUNTS else f"{got:.4f}"
            checked += 1
            if text != want:
                bad.append(f"{qid} {measure}: evret {text}, trec_eval {want}")
    return bad, checked


def _load(case: tuple[str, str, str, dict[str, Any]]) -> tuple[dict[str, dict[str, str]], Any, Any, list[str]]:
    out, qrels_file, run_file, _ = case
    base = shared_dir() / "datasets" / "trec_eval"
    expected = parse_output(base / out)
    measures = sorted({m for row in expected.values() for m in row if evret_name(m)})
    assert measures, f"{out}: no measure that Evret claims"
    specs = sorted({evret_name(m) for m in measures})  # type: ignore[misc]
    return expected, read_qrels(base / qrels_file), read_run(base / run_file), specs


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_evaluate_run_matches_trec_eval(case: tuple[str, str, str, dict[str, Any]], engine_path: Any) -> None:
    expected, qrels, run, specs = _load(case)
    per_query = evaluate_run(qrels, run, specs, per_query=True, **case[3])
    assert set(per_query) == set(expected) - {"all"} or "all" in expected and len(expected) == 1
    bad, checked = _mismatches(expected, per_query)
    assert checked >= len(specs)
    assert not bad, f"{len(bad)} of {checked} values differ:\n" + "\n".join(bad[:40])
    means = evaluate_run(qrels, run, specs, **case[3])
    for name in specs:
        assert means[name] == pytest.approx(sum(r[name] for r in per_query.values()) / len(per_query), abs=1e-12)
    if engine_path is not None:  # the compiled reader really read these files' dicts
        assert engine_path.read > 0 and engine_path.declined == 0


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_ranked_lists_match_trec_eval(case: tuple[str, str, str, dict[str, Any]], rankings_path: Any) -> None:
    expected, qrels, run, specs = _load(case)
    rankings = {qid: ranked_docs(scores) for qid, scores in run.items()}
    per_query = evaluate_rankings(qrels, rankings, specs, per_query=True, **case[3])
    bad, checked = _mismatches(expected, per_query)
    assert not bad, f"{len(bad)} of {checked} values differ:\n" + "\n".join(bad[:40])
    if rankings_path is not None:  # the compiled list reader really read these lists
        assert rankings_path.read > 0 and rankings_path.declined == 0


def test_claimed_measures_are_all_covered() -> None:
    """The reference files print every trec_eval measure that Evret maps, so none is silently untested."""
    base = shared_dir() / "datasets" / "trec_eval"
    printed = {m for case in CASES for row in parse_output(base / case[0]).values() for m in row}
    families = {evret_name(m).split("@")[0] for m in printed if evret_name(m)}  # type: ignore[union-attr]
    assert families == {"precision", "recall", "f1", "hit_rate", "mrr", "ndcg", "ap", "r_precision", "bpref",
                        "rbp", "rbp_residual", "num_rel_ret", "num_rel", "num_ret", "unjudged"}


@pytest.mark.parametrize(("out", "level"), [("out.negative.bpref.q", None), ("out.negative.bpref.ql", 2)])
def test_bpref_counts_negative_grades_as_neither_relevant_nor_judged_non_relevant(out: str, level: int | None) -> None:
    """trec_eval 10.0's bpref skips a document judged -1 (in the pool, unjudged), -2 (not in the pool) or any other
    negative grade, and leaves it out of N: tests/metrics/data/out.negative.bpref.q{,l} are its output on files
    where such documents rank above relevant ones (tests/metrics/data/README.md)."""
    data = Path(__file__).parent / "data"
    expected = parse_output(data / out)
    per_query = evaluate_run(read_qrels(data / "qrels.negative"), read_run(data / "results.negative"), ["bpref"],
                             per_query=True, relevance_level=level)
    bad, checked = _mismatches(expected, per_query)
    assert checked == 7 and not bad, bad
    if level is None:  # the case: -1 above a relevant document, and a query whose only non-relevant one is -1
        assert [per_query[q]["bpref"] for q in ("q1", "q5", "q6")] == [1.0, 1.0, 1.0]
