"""err's default max_grade is the highest grade judged over the whole evaluation, whatever the chunking: the
engine's chunks (``chunk_size``), the evaluator's metric chunks, run-file shards. Here grade 3 is judged for one
query only (q5), so a chunk without q5 would take 1 as its max_grade and score its queries 4 times higher."""

from __future__ import annotations

from pathlib import Path

import pytest

from evret_core import evaluate_run
from evret_core.cli import main
from evret_core.contracts.errors import EvretError
from evret_core.evaluation import evaluator as retrieval
from evret_core.evaluation.evaluator import Evaluator
from evret_core.io.datasets import EvaluationDataset
from evret_core.io.queries import QueryExample
from evret_core.metrics.engine import evaluate_rankings
from evret_core.metrics.shards import evaluate_run_file
from evret_core.plugins.registry import create_metric

QRELS = {f"q{i}": {"d1": 1.0, "d2": 0.0} for i in range(1, 9)}
QRELS["q5"] = {"d1": 3.0, "d2": 1.0}
RANKINGS = {q: ["d1", "d2", "d3"] for q in QRELS}
RUN = {q: {d: float(3 - r) for r, d in enumerate(ranking)} for q, ranking in RANKINGS.items()}
METRICS = ["err@10", "err@10(max_grade=1)", "ndcg@10"]


def expected_err(qid: str) -> float:
    """By hand, max_grade 3: grade 1 at rank 1 stops with (2^1 - 1) / 2^3; q5 stops at rank 1 with 7/8, else
    at rank 2 with 1/8."""
    if qid == "q5":
        return 7 / 8 + 1 / 2 * 1 / 8 * (1 - 7 / 8)
    return 1 / 8


def assert_per_query(got: dict[str, dict[str, float]], whole: dict[str, dict[str, float]]) -> None:
    assert list(got) == list(whole)
    for qid, values in got.items():
        assert list(values) == METRICS  # the name stays err@10: the resolved default is not an option
        assert values == pytest.approx(whole[qid], abs=1e-15), qid
        assert values["err@10"] == pytest.approx(expected_err(qid), abs=1e-15), qid


@pytest.fixture(scope="module")
def whole() -> dict[str, dict[str, float]]:
    return evaluate_run(QRELS, RUN, METRICS, per_query=True)  # one chunk


@pytest.mark.parametrize("chunk_size", [1, 2, 3])
def test_chunks_of_evaluate_run_and_evaluate_rankings(chunk_size: int, whole: dict[str, dict[str, float]]) -> None:
    assert_per_query(evaluate_run(QRELS, RUN, METRICS, per_query=True, chunk_size=chunk_size), whole)
    assert_per_query(evaluate_rankings(QRELS, RANKINGS, METRICS, per_query=True, chunk_size=chunk_size), whole)
    # the explicit option: max_grade 1 for every query, q5's grade 3 counting as 1 (it was raised to 3 in the
    # chunks that held q5 only)
    assert whole["q1"]["err@10(max_grade=1)"] == 1 / 2
    assert whole["q5"]["err@10(max_grade=1)"] == 1 / 2 + 1 / 2 * 1 / 2 * (1 - 1 / 2)


def test_judgments_of_queries_missing_from_the_run_count(whole: dict[str, dict[str, float]]) -> None:
    # the whole qrels sets the scale, not only the run's queries: q1's value is the same without q5 in the run
    run = {q: r for q, r in RUN.items() if q != "q5"}
    got = evaluate_run(QRELS, run, ["err@10"], per_query=True, chunk_size=2)
    assert got["q1"]["err@10"] == whole["q1"]["err@10"] == 1 / 8


@pytest.mark.parametrize("shards", [1, 3, 8])
def test_run_file_shards(shards: int, tmp_path: Path, whole: dict[str, dict[str, float]]) -> None:
    qrels, run = tmp_path / "qrels", tmp_path / "run.trec"
    qrels.write_text("".join(f"{q} 0 {d} {g:g}\n" for q, judged in QRELS.items() for d, g in judged.items()))
    run.write_text("".join(f"{q} Q0 {d} {r + 1} {RUN[q][d]:g} t\n" for q, ranking in RANKINGS.items()
                           for r, d in enumerate(ranking)))
    got = evaluate_run_file(qrels, run, METRICS, shards=shards)
    assert got.qids == list(QRELS) and list(got.values) == METRICS
    assert_per_query({q: got.per_query(q) for q in got.qids}, whole)


def test_cli_trec_shards(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    qrels, run = tmp_path / "qrels", tmp_path / "run.trec"
    qrels.write_text("".join(f"{q} 0 {d} {g:g}\n" for q, judged in QRELS.items() for d, g in judged.items()))
    run.write_text("".join(f"{q} Q0 {d} {r + 1} {RUN[q][d]:g} t\n" for q, ranking in RANKINGS.items()
                           for r, d in enumerate(ranking)))
    argv = ["trec", str(qrels), str(run), "-m", "err@10", "--per-query"]
    assert main(argv) == 0
    whole = capsys.readouterr().out
    rows = {q: float(v) for m, q, v in (line.split("\t") for line in whole.splitlines()) if m.strip() == "err@10"}
    assert rows["q1"] == 0.125 and rows["q5"] == pytest.approx(expected_err("q5"), abs=1e-4)
    for shards in ("3", "8"):
        assert main([*argv, "--shards", shards]) == 0
        assert capsys.readouterr().out == whole, shards


def test_run_file_shards_with_complete(tmp_path: Path) -> None:
    # q5 is only in the qrels: the shards still score with max_grade 3, as evaluate_run(complete=True) does
    qrels, run = tmp_path / "qrels", tmp_path / "run.trec"
    qrels.write_text("".join(f"{q} 0 {d} {g:g}\n" for q, judged in QRELS.items() for d, g in judged.items()))
    run.write_text("".join(f"{q} Q0 d1 1 1 t\n" for q in QRELS if q != "q5"))
    got = evaluate_run_file(qrels, run, ["err@10"], shards=4, complete=True)
    expected = evaluate_run(QRELS, {q: {"d1": 1.0} for q in QRELS if q != "q5"}, ["err@10"], per_query=True,
                            complete=True)
    assert {q: got.per_query(q) for q in got.qids} == expected
    assert got.per_query("q1")["err@10"] == 1 / 8 and got.per_query("q5")["err@10"] == 0.0


def test_the_evaluators_metric_chunks(monkeypatch: pytest.MonkeyPatch, whole: dict[str, dict[str, float]]) -> None:
    dataset = EvaluationDataset(queries=[QueryExample(query_id=q, query_text=f"query {q}", relevant_doc_ids=judged)
                                         for q, judged in QRELS.items()])
    run = {q: [{"doc_id": d, "score": s} for d, s in scores.items()] for q, scores in RUN.items()}
    monkeypatch.setattr(retrieval, "_CHUNK", 3)  # three metric chunks; only the second holds q5
    results = Evaluator(run, metrics=METRICS, k=10).evaluate(dataset)
    assert_per_query({q: results.per_query[q].scores for q in QRELS}, whole)


def test_a_metric_alone_takes_its_batch_as_the_evaluation() -> None:
    metric = create_metric("err@10")
    assert metric.needs_judged_max and metric.score(["d1"], {"d1": 1}) == 1 / 2
    resolved = metric.with_judged_max(3.0)
    assert resolved.name == "err@10" and resolved is not metric and metric.needs_judged_max
    assert resolved.score(["d1"], {"d1": 1}) == 1 / 8
    explicit = create_metric("err@10(max_grade=2)")
    assert not explicit.needs_judged_max and explicit.with_judged_max(3.0) is explicit


def test_a_bad_grade_anywhere_in_the_qrels_is_an_error_naming_it() -> None:
    qrels = {**QRELS, "q9": {"d7": "high"}}
    with pytest.raises(EvretError, match=r"^qrels: query q9: document 'd7' has a non-numeric grade 'high'$"):
        evaluate_run(qrels, RUN, ["err@10"])  # type: ignore[arg-type]
