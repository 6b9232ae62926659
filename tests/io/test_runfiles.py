"""Retrieved results from files (JSONL dumps and TREC runs): read, ranked, validated, and evaluated."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evret_core import EvaluationDataset, Evaluator
from evret_core.contracts.errors import EvretError
from evret_core.io.runs import read_retrieved, read_retrieved_jsonl

from .._helpers import CORPUS, DATASET, METRICS, OverlapRetriever


def _write_lines(path: Path, records: list[dict]) -> Path:  # type: ignore[type-arg]
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def _dump_run(tmp_path: Path, per_query: bool) -> Path:
    """What a team's RAG system would dump: every query's top 10 with scores and texts."""
    dataset = EvaluationDataset.from_jsonl(DATASET)
    retriever = OverlapRetriever()
    records = []
    for q in dataset:
        results = [{"doc_id": r.doc_id, "score": r.score, "text": r.text} for r in retriever(q.query_text, 10)]
        if per_query:
            records.append({"query_id": q.query_id, "results": results})
        else:
            records.extend({"query_id": q.query_id, **r} for r in results)
    return _write_lines(tmp_path / "retrieved.jsonl", records)


@pytest.mark.parametrize("per_query", [False, True])
def test_a_dumped_run_scores_exactly_like_the_live_retriever(tmp_path: Path, per_query: bool, good_results) -> None:  # type: ignore[no-untyped-def]
    run = read_retrieved(_dump_run(tmp_path, per_query))
    results = Evaluator(run, metrics=METRICS, judge="token-overlap").evaluate(EvaluationDataset.from_jsonl(DATASET))
    assert results.per_query_scores() == good_results.per_query_scores()


def test_rank_fields_order_the_results(tmp_path: Path) -> None:
    path = _write_lines(tmp_path / "r.jsonl", [
        {"query_id": "q1", "doc_id": "b", "rank": 2}, {"query_id": "q1", "doc_id": "a", "rank": 1},
        {"query_id": 7, "doc_id": 3}, {"query_id": 7, "doc_id": 1},
    ])
    run = read_retrieved_jsonl(path)
    assert [r["doc_id"] for r in run["q1"]] == ["a", "b"]
    assert [r["doc_id"] for r in run["7"]] == ["3", "1"]  # file order without ranks


@pytest.mark.parametrize(("record", "message"), [
    ({"query_id": "q1", "doc_id": "a", "score": float("nan")}, "'score' must be a finite number"),
    ({"query_id": "q1", "doc_id": ""}, "'doc_id' must be a non-empty"),
    ({"query_id": "", "doc_id": "a"}, "'query_id' must be a non-empty"),
    ({"query_id": "q1", "doc_id": "a", "rank": 0}, "'rank' must be a positive integer"),
    ({"query_id": "q1", "doc_id": "a", "txt": "typo"}, "unknown field"),
    ({"query_id": "q1", "doc_id": "a", "text": 5}, "'text' must be a string"),
    ({"query_id": "q1", "results": {"doc_id": "a"}}, "'results' must be a list"),
    ([1, 2], "expected a JSON object"),
])
def test_bad_lines_name_the_file_and_line(tmp_path: Path, record: object, message: str) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps({"query_id": "q0", "doc_id": "x"}) + "\n" + json.dumps(record) + "\n")
    with pytest.raises(EvretError, match=message) as err:
        read_retrieved_jsonl(path)
    assert f"{path}:2" in str(err.value)


def test_a_document_listed_twice_names_both_lines(tmp_path: Path) -> None:
    path = _write_lines(tmp_path / "r.jsonl", [{"query_id": "q", "doc_id": "a"}, {"query_id": "q", "doc_id": "b"},
                                               {"query_id": "q", "doc_id": "a"}])
    with pytest.raises(EvretError, match=r"r.jsonl:3: document 'a' is listed twice .*r.jsonl:1"):
        read_retrieved_jsonl(path)
    path = _write_lines(tmp_path / "s.jsonl", [{"query_id": "q", "results": [{"doc_id": "a"}, {"doc_id": "a"}]}])
    with pytest.raises(EvretError, match="listed twice"):
        read_retrieved_jsonl(path)


def test_an_empty_file_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "e.jsonl").write_text("\n")
    with pytest.raises(EvretError, match="has no results"):
        read_retrieved(tmp_path / "e.jsonl")
    with pytest.raises(EvretError, match="no such retrieved results file"):
        read_retrieved(tmp_path / "missing.jsonl")


def test_a_trec_run_with_a_corpus_gets_texts_and_trec_order(tmp_path: Path) -> None:
    run_file = tmp_path / "run.trec"
    run_file.write_text("q01 Q0 bee-003 1 2.0 t\nq01 Q0 bee-002 2 5.0 t\nq01 Q0 bee-001 3 5.0 t\n")
    compact = read_retrieved(run_file)
    assert compact == {"q01": {"bee-003": 2.0, "bee-002": 5.0, "bee-001": 5.0}}
    run = read_retrieved(run_file, corpus=CORPUS)
    # by score, ties broken by doc id in descending order (trec_eval)
    assert [r["doc_id"] for r in run["q01"]] == ["bee-002", "bee-001", "bee-003"]
    assert run["q01"][0]["metadata"]["text"].startswith("The queen is the only fertile female")
    run_file.write_text("q01 Q0 nowhere 1 2.0 t\n")
    with pytest.raises(EvretError, match="'nowhere', which is not in the corpus"):
        read_retrieved(run_file, corpus=CORPUS)


# -- issue 24 (red-team E17, E17b, E07, E10) ------------------------------------------------------------------------
def _ids_dataset(tmp_path: Path) -> Path:
    return _write_lines(tmp_path / "ds.jsonl", [{"query_id": "q1", "query": "one", "relevant_doc_ids": ["a"]},
                                                {"query_id": "q2", "query": "two", "relevant_doc_ids": ["c"]}])


def _evaluate_cli(tmp_path: Path, run: Path, *extra: str) -> tuple[int, str, str]:
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-W", "error", "-m", "evret_core.cli", "evaluate", "--dataset",
                           str(_ids_dataset(tmp_path)), "--run", str(run), "--metric", "recall@3", "--no-progress",
                           *extra], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    return proc.returncode, proc.stdout, proc.stderr


@pytest.mark.parametrize(("value", "message"), [
    ('"xcx"', "query 'q2' maps to the string 'xcx'"),
    ('"c"', "query 'q2' maps to the string 'c'"),
    ("3", "query 'q2' maps to 3; a JSON run maps each query to {doc_id: score} or to a list of doc ids"),
    ('["x", "c", "x"]', "query 'q2' lists document 'x' twice"),
    ('["c", 5]', "query 'q2': every entry of its list must be a doc id"),
])
def test_a_json_run_with_a_string_or_a_repeated_id_names_the_file_and_query(
    tmp_path: Path, value: str, message: str
) -> None:
    run = tmp_path / "run.json"
    run.write_text('{"q1": ["a"], "q2": ' + value + "}")
    code, out, err = _evaluate_cli(tmp_path, run)
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert err.startswith(f"evret: error: {run}: {message}"), err
    assert "recall@3" not in out


def test_a_string_row_from_python_is_never_split_into_characters() -> None:
    dataset = EvaluationDataset.from_records([{"query_id": "q2", "query": "two", "relevant_doc_ids": ["c"]}])
    with pytest.raises(EvretError, match=r"query 'q2': got the string 'xcx' instead of a list of results"):
        Evaluator({"q2": "xcx"}, metrics=["recall@3"]).evaluate(dataset)


def test_run_queries_the_dataset_lacks_are_ignored_with_a_warning(tmp_path: Path) -> None:
    run = tmp_path / "run.json"
    run.write_text(json.dumps({"q1": ["a"], "q2": ["c"], "zzz": ["a"], "q9": ["b"]}))
    code, out, err = _evaluate_cli(tmp_path, run)
    assert code == 0, err
    assert "WARNING: 2 queries of the run are not in the dataset, ignored: zzz, q9" in err
    results = Evaluator(read_retrieved(_write_lines(tmp_path / "r.jsonl", [
        {"query_id": "q1", "doc_id": "a"}, {"query_id": "q2", "doc_id": "c"}, {"query_id": "zzz", "doc_id": "a"}])),
        metrics=["recall@3"]).evaluate(EvaluationDataset.from_jsonl(_ids_dataset(tmp_path)))
    assert results.stats["extra_run_queries"] == {"count": 1, "queries": ["zzz"], "ignored": True}
    assert results.scores["recall@3"] == 1.0


def test_ranks_on_some_documents_of_a_query_only_name_the_query_and_lines(tmp_path: Path) -> None:
    path = _write_lines(tmp_path / "r.jsonl", [
        {"query_id": "q1", "doc_id": "b", "rank": 1}, {"query_id": "q1", "doc_id": "a"},
        {"query_id": "q2", "doc_id": "c"}])
    with pytest.raises(EvretError, match=r"r.jsonl:2: document 'a' of query 'q1' has no 'rank', but 'b' "
                                         r"\(.*r.jsonl:1\) has one; give every document of a query a rank, or none"):
        read_retrieved_jsonl(path)
    per_query = _write_lines(tmp_path / "p.jsonl", [
        {"query_id": "q1", "results": [{"doc_id": "b"}, {"doc_id": "a", "rank": 1}]}])
    with pytest.raises(EvretError, match=r"p.jsonl:1: document 'b' of query 'q1' has no 'rank', but 'a'"):
        read_retrieved_jsonl(per_query)


# -- issue 24 (newcomer problem 1): --missing-queries zero on text-labelled data --------------------------------
def _partial_text_run(tmp_path: Path) -> Path:
    """Four of the 22 text-labelled queries, with the texts a judge needs."""
    lines = _dump_run(tmp_path, per_query=True).read_text().splitlines()[:4]
    path = tmp_path / "partial.jsonl"
    path.write_text("".join(line + "\n" for line in lines))
    return path


def test_missing_queries_zero_on_text_labelled_data_scores_them_0_from_python(tmp_path: Path) -> None:
    dataset = EvaluationDataset.from_jsonl(DATASET)
    run = read_retrieved(_partial_text_run(tmp_path))
    results = Evaluator(run, metrics=METRICS, judge="token-overlap", missing_queries="zero").evaluate(dataset)
    missing = [q.query_id for q in dataset if q.query_id not in run]
    assert len(missing) == 18 and results.stats["missing_queries"]["queries"] == missing
    scores = results.per_query_scores()
    assert all(scores[q] == dict.fromkeys(METRICS, 0.0) for q in missing)
    assert results.per_query[missing[0]].judgments == []
    present = Evaluator(run, metrics=METRICS, judge="token-overlap").evaluate(
        EvaluationDataset(queries=[q for q in dataset if q.query_id in run]))
    # the 4 scored queries score as alone; the mean is over all 22 with the missing ones at 0
    assert {q: scores[q] for q in run} == present.per_query_scores()
    assert results.scores["recall@5"] == pytest.approx(sum(s["recall@5"] for s in scores.values()) / 22)


def test_missing_queries_zero_on_text_labelled_data_from_the_cli(tmp_path: Path) -> None:
    import subprocess
    import sys

    out = tmp_path / "o.json"
    proc = subprocess.run([sys.executable, "-W", "error", "-m", "evret_core.cli", "evaluate", "--dataset",
                           str(DATASET), "--run", str(_partial_text_run(tmp_path)), "--metric", "recall@5",
                           "--judge", "token-overlap", "--missing-queries", "zero", "--no-progress", "--output",
                           str(out)], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "WARNING: 18 queries missing from the run, scored 0: q05" in proc.stderr
    assert json.loads(out.read_text())["stats"]["missing_queries"]["count"] == 18
