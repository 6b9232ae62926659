"""The columnar evaluator: precomputed runs in every form, retrievers giving columns, per-query views built on
demand, streamed results files, and the errors that replace silent wrong numbers (issue 13 items 1 and 3)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from evret_core import EvaluationDataset, EvaluationResults, Evaluator, EvretError, QueryExample, Retriever
from evret_core.cli import main
from evret_core.contracts.retrieve import RankedColumns
from evret_core.metrics.engine import evaluate_run
from evret_core.results.per_query import QueryTable
from evret_core.results.stored import StoredQueries

QRELS = {f"q{i}": {f"d{i}": 1.0, f"d{i + 1}": 2.0} for i in range(22)}


def id_dataset() -> EvaluationDataset:
    return EvaluationDataset(queries=[QueryExample(query_id=q, query_text=f"text {q}", relevant_doc_ids=rel)
                                      for q, rel in QRELS.items()])


def dict_run() -> dict[str, dict[str, float]]:
    return {q: {f"d{i}": 3.0, f"d{i + 5}": 2.0, f"d{i + 1}": 1.0, "dz": 1.0} for i, q in enumerate(QRELS)}


METRICS = ["ndcg@10", "recall@3", "mrr@10", "precision@2", "ap", "bpref"]


def test_a_run_missing_queries_is_an_error_naming_them() -> None:
    run = {"q0": dict_run()["q0"]}  # covers 1 of 22 queries: today it is averaged over all 22 silently
    with pytest.raises(EvretError, match=r"lacks 21 of the dataset's 22 queries \('q1', 'q2', 'q3', 'q4', 'q5', "
                                         r"\.\.\.\).*missing_queries='zero'"):
        Evaluator(run, ["ndcg@10"]).evaluate(id_dataset())


def test_missing_queries_zero_scores_them_0_and_reports_them() -> None:
    run = {q: r for q, r in dict_run().items() if q not in ("q3", "q7")}
    res = Evaluator(run, ["ndcg@10", "recall@3"], missing_queries="zero").evaluate(id_dataset())
    assert res.stats["missing_queries"] == {"count": 2, "queries": ["q3", "q7"], "counted_as": 0.0}
    assert res.per_query["q3"].scores == {"ndcg@10": 0.0, "recall@3": 0.0}
    assert res.per_query["q3"].retrieved_ids == []
    full = evaluate_run(QRELS, run, ["ndcg@10"], complete=True)  # trec_eval -c: the same convention
    assert res.scores["ndcg@10"] == pytest.approx(full["ndcg@10"], abs=1e-12)
    with pytest.raises(EvretError, match="missing_queries must be one of error, zero"):
        Evaluator(run, ["ndcg@10"], missing_queries="skip")


def test_a_cutoff_deeper_than_k_is_an_error_naming_both() -> None:
    with pytest.raises(EvretError, match=r"metric recall@10 reads deeper than the retrieval depth k=3"):
        Evaluator(dict_run(), ["recall@10", "mrr"], k=3)
    Evaluator(dict_run(), ["recall@3", "mrr", "ap"], k=3)  # no cutoff, or one within k: fine


def test_cli_missing_queries_and_deep_cutoff(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({"query_id": q, "query": q, "relevant_doc_ids": list(rel)}) + "\n"
                            for q, rel in QRELS.items()))
    run = tmp_path / "run.trec"
    run.write_text("".join(f"q0 Q0 {d} {r} {s} t\n" for r, (d, s) in enumerate(dict_run()["q0"].items(), 1)))
    base = ["evaluate", "--dataset", str(data), "--retriever", "run", "--retriever-option", f"path={run}",
            "--metric", "ndcg@10", "--no-progress"]
    assert main(base) == 2
    err = capsys.readouterr().err
    assert "lacks 21 of the dataset's 22 queries" in err and "Traceback" not in err and len(err.splitlines()) == 1
    out = tmp_path / "r.json"
    assert main([*base, "--missing-queries", "zero", "--output", str(out)]) == 0
    assert "WARNING: 21 queries missing from the run, scored 0" in capsys.readouterr().err
    assert EvaluationResults.from_json(out).stats["missing_queries"]["count"] == 21
    assert main([*base, "--missing-queries", "zero", "--metric", "recall@10", "-k", "3"]) == 2
    assert "recall@10 reads deeper than the retrieval depth k=3" in capsys.readouterr().err


@pytest.mark.parametrize("form", ["dict", "ranked ids", "objects", "columns"])
def test_every_run_form_scores_as_evaluate_run(form: str) -> None:
    runs = dict_run()
    ranked = {q: sorted(sorted(r, reverse=True), key=r.__getitem__, reverse=True) for q, r in runs.items()}
    if form == "dict":
        run: dict[str, object] = dict(runs)
    elif form == "ranked ids":
        run = dict(ranked)
    elif form == "objects":
        run = {q: [{"doc_id": d, "score": runs[q][d]} for d in docs] for q, docs in ranked.items()}
    else:
        run = {q: RankedColumns(docs, [runs[q][d] for d in docs]) for q, docs in ranked.items()}
    res = Evaluator(run, METRICS, k=100).evaluate(id_dataset())
    expected = evaluate_run(QRELS, runs, METRICS, per_query=True)
    for qid, values in expected.items():
        assert res.per_query[qid].scores == pytest.approx(values, abs=1e-12), (form, qid)
    assert res.per_query["q4"].retrieved_ids == ranked["q4"]


def test_int_doc_ids_in_a_dict_run_are_ranked_as_strings() -> None:
    dataset = EvaluationDataset(queries=[QueryExample(query_id="q", query_text="q", relevant_doc_ids=["2"])])
    res = Evaluator({"q": {1: 0.9, 2: 0.5}}, ["mrr@10"]).evaluate(dataset)
    assert res.scores["mrr@10"] == 0.5 and res.per_query["q"].retrieved_ids == ["1", "2"]


class ColumnRetriever(Retriever):
    """Returns columns only (as bm25 and the vector stores do); counts the calls."""

    name = "columns"

    def __init__(self) -> None:
        self.calls = 0

    def batch_retrieve_columns(self, queries: Sequence[str], k: int) -> list[RankedColumns]:
        self.calls += 1
        ids = np.array(["alpha", "beta", "gamma"], dtype=object)
        return [RankedColumns(ids[:k], np.array([3.0, 2.0, 1.0])[:k], ["has alpha", "beta here", "none"][:k])
                for _ in queries]


def test_a_retriever_giving_columns_and_views_built_on_demand() -> None:
    retriever = ColumnRetriever()
    dataset = EvaluationDataset(queries=[QueryExample(query_id=f"t{i}", query_text=f"q{i}", expected_answers=["beta"])
                                         for i in range(3)])
    res = Evaluator(retriever, ["mrr@3", "recall@3"], judge="regex").evaluate(dataset)
    assert retriever.calls == 1 and res.scores == {"mrr@3": 0.5, "recall@3": 1.0}
    assert isinstance(res.per_query, QueryTable)  # no QueryResult was built to score
    view = res.per_query["t1"]
    assert [j.matched for j in view.judgments] == [[], [0], []]
    assert [j.assigned for j in view.judgments] == ["alpha", "answer:0", "gamma"]
    assert list(res.per_query) == ["t0", "t1", "t2"] and "t2" in res.per_query and "x" not in res.per_query
    assert res.per_query_scores()["t2"] == {"mrr@3": 0.5, "recall@3": 1.0}


def test_streamed_results_file_loads_back_equal(tmp_path: Path) -> None:
    res = Evaluator(dict_run(), METRICS, k=100).evaluate(id_dataset())
    path = tmp_path / "r.json"
    assert res.to_json(path) is None
    text = path.read_text()
    loaded = EvaluationResults.from_json(path)
    assert isinstance(loaded.per_query, StoredQueries)  # read as columns, records built on lookup
    assert loaded.model_dump() == res.model_dump()  # the same data whether streamed or dumped at once
    assert json.loads(text) == json.loads(res.model_dump_json())
    assert list(json.loads(text)) == list(EvaluationResults.model_fields)  # the schema's field order
    assert loaded.to_json() == res.to_json()  # a loaded file streams the same text
    assert json.loads(res.to_json(indent=None) or "") == json.loads(text)


def test_a_nan_retriever_score_is_written_as_null(tmp_path: Path) -> None:
    dataset = EvaluationDataset(queries=[QueryExample(query_id="q", query_text="q", relevant_doc_ids=["a"])])
    run = {"q": RankedColumns(["a", "b"], [float("nan"), 1.0])}
    path = tmp_path / "r.json"
    Evaluator(run, ["mrr@2"]).evaluate(dataset).to_json(path)

    def refuse(name: str) -> None:
        raise AssertionError(f"{name} in the results file")

    data = json.loads(path.read_text(), parse_constant=refuse)  # strict JSON: no NaN token
    assert data["per_query"]["q"]["judgments"][0]["score"] is None
