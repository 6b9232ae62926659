"""EvaluationDataset.from_beir on BEIR SciFact, and the ``evret trec`` command against trec_eval's outputs."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from evret_core import EvaluationDataset, EvretError
from evret_core.cli import main

_spec = importlib.util.spec_from_file_location("trec_eval_output", Path(__file__).parents[1] / "trec_eval_output.py")
assert _spec and _spec.loader
trec_eval_output = importlib.util.module_from_spec(_spec)
sys.modules["trec_eval_output"] = trec_eval_output
_spec.loader.exec_module(trec_eval_output)
parse_output, shared_dir = trec_eval_output.parse_output, trec_eval_output.shared_dir


def test_from_beir_scifact() -> None:
    folder = shared_dir() / "datasets" / "scifact"
    dataset = EvaluationDataset.from_beir(folder)
    assert len(dataset) == 300  # the test split's judged queries only
    assert dataset.corpus is not None and len(dataset.corpus) == 5183
    assert set(dataset.corpus["4983"]) == {"title", "text"}
    assert dataset.corpus["4983"]["title"].startswith("Microstructural development")
    first = dataset.queries[0]
    assert first.query_id == "1" and first.relevant_doc_ids == {"31715818": 1.0}
    assert sum(len(q.relevance) for q in dataset) == 339
    assert all(not qid.endswith("\r") for q in dataset for qid in q.relevance)
    assert EvaluationDataset.load(folder).content_hash() == dataset.content_hash()
    train = EvaluationDataset.from_beir(folder, split="train")
    assert len(train) > 300
    with pytest.raises(EvretError, match="no qrels/dev.tsv"):
        EvaluationDataset.from_beir(folder, split="dev")


def _beir(tmp_path: Path, qrels: str) -> Path:
    (tmp_path / "qrels").mkdir()
    (tmp_path / "corpus.jsonl").write_text('{"_id": "d1", "title": "T", "text": "x"}\n{"_id": "d2", "text": "y"}\n')
    (tmp_path / "queries.jsonl").write_text('{"_id": "q1", "text": "what"}\n{"_id": "q2", "text": "who"}\n')
    (tmp_path / "qrels" / "test.tsv").write_bytes(qrels.encode())
    return tmp_path


def test_from_beir_grades_and_dropped_queries(tmp_path: Path) -> None:
    dataset = EvaluationDataset.from_beir(_beir(tmp_path, "query-id\tcorpus-id\tscore\r\nq1\td1\t2\r\nq1\td2\t0\r\n"))
    assert [q.query_id for q in dataset] == ["q1"]
    assert dataset.queries[0].relevant_doc_ids == {"d1": 2.0, "d2": 0.0}
    assert dataset.corpus == {"d1": {"title": "T", "text": "x"}, "d2": {"title": "", "text": "y"}}


def test_from_beir_bad_line_names_file_and_line(tmp_path: Path) -> None:
    with pytest.raises(EvretError, match=r"test.tsv:3: expected 3 tab-separated fields"):
        EvaluationDataset.from_beir(_beir(tmp_path, "query-id\tcorpus-id\tscore\nq1\td1\t1\nq2 d2 1\n"))


def _trec_files() -> Path:
    return shared_dir() / "datasets" / "trec_eval"


def test_cli_trec_table_matches_trec_eval(capsys: pytest.CaptureFixture[str]) -> None:
    base = _trec_files()
    code = main(["trec", str(base / "qrels.test"), str(base / "results.test"), "-m", "ndcg@10", "-m", "ap",
                 "-m", "num_rel_ret", "--per-query"])
    assert code == 0
    rows = [line.split("\t") for line in capsys.readouterr().out.splitlines()]
    got = {(q, m.strip()): v for m, q, v in rows}
    expected = parse_output(base / "out.test.aq")
    for qid, values in expected.items():
        assert got[(qid, "ndcg@10")] == values["ndcg_cut_10"]
        assert got[(qid, "ap")] == values["map"]
        assert got[(qid, "num_rel_ret")] == values["num_rel_ret"]
    assert got[("all", "runid")] == "STANDARD" and got[("all", "num_q")] == "3"


def test_cli_trec_json_complete_and_level(capsys: pytest.CaptureFixture[str]) -> None:
    base = _trec_files()
    assert main(["trec", str(base / "qrels.test"), str(base / "results.trunc"), "-m", "bpref", "--complete",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["num_q"] == 3 and f"{out['all']['bpref']:.4f}" == parse_output(base / "out.test.aqc")["all"]["bpref"]
    assert main(["trec", str(base / "qrels.rel_level"), str(base / "results.test"), "-m", "precision@10",
                 "--relevance-level", "2", "--json", "--per-query"]) == 0
    out = json.loads(capsys.readouterr().out)
    expected = parse_output(base / "out.test.aql")
    assert f"{out['per_query']['302']['precision@10']:.4f}" == expected["302"]["P_10"]


@pytest.mark.parametrize("run_name", ["results.test", "results.trunc"])
@pytest.mark.parametrize("extra", [[], ["--complete"], ["--relevance-level", "2"]])
def test_cli_trec_in_shards_prints_the_same_table(run_name: str, extra: list[str], tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """--shards / --executor local: each shard reads its part of the file; the table is the in-process one."""
    base = _trec_files()
    lines = (base / run_name).read_text().splitlines(keepends=True)
    run = tmp_path / run_name  # results.trunc interleaves its queries: sorted by query (stable), as shards need
    run.write_text("".join(sorted(lines, key=lambda line: line.split()[0])))
    argv = ["trec", str(base / "qrels.test"), str(run), "--per-query", *extra]
    assert main(argv) == 0
    whole = capsys.readouterr().out
    for flags in (["--shards", "2"], ["--shards", "7"], ["--executor", "local"]):
        assert main([*argv, *flags]) == 0
        assert capsys.readouterr().out == whole, flags
    if extra == ["--complete"] and run_name == "results.trunc":
        rows = {(q, m.strip()): v for m, q, v in (line.split("\t") for line in whole.splitlines())}
        assert rows[("all", "bpref")] == parse_output(base / "out.test.aqc")["all"]["bpref"]


def test_cli_trec_bad_shards_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    base = _trec_files()
    assert main(["trec", str(base / "qrels.test"), str(base / "results.test"), "--shards", "0"]) == 2
    assert "--shards must be between 1 and 10,000, got 0" in capsys.readouterr().err
    assert main(["trec", str(base / "qrels.test"), str(base / "results.test"), "--executor", "nope"]) == 2
    assert "nope" in capsys.readouterr().err
    # T03b: 10**18 shards ran for 34 minutes; now refused before any work
    assert main(["trec", str(base / "qrels.test"), str(base / "results.test"), "--shards", str(10**18)]) == 2
    assert f"--shards must be between 1 and 10,000, got {10**18}" in capsys.readouterr().err


@pytest.mark.parametrize("extra", [[], ["--shards", "2"]])
def test_cli_trec_folders_and_empty_runs_exit_2(extra: list[str], tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    """T14/T14c: a folder as run or qrels; T09/T10: an empty or comments-only run (it said 'complete=True')."""
    qrels = str(_trec_files() / "qrels.test")
    assert main(["trec", qrels, str(tmp_path), *extra]) == 2
    assert capsys.readouterr().err.strip() == f"evret: error: {tmp_path}: is a folder, not a file"
    assert main(["trec", str(tmp_path), str(_trec_files() / "results.test"), *extra]) == 2
    assert capsys.readouterr().err.strip() == f"evret: error: {tmp_path}: is a folder, not a file"
    run = tmp_path / "run"
    for text in ("", "# comment\n\n"):
        run.write_text(text)
        assert main(["trec", qrels, str(run), *extra]) == 2
        err = capsys.readouterr().err
        assert f"{run}: the run file has no result lines" in err and "complete=True" not in err


def test_cli_trec_metric_options_in_names(capsys: pytest.CaptureFixture[str]) -> None:
    base = _trec_files()
    argv = ["trec", str(base / "qrels.comment.test"), str(base / "results.comment.test"), "--json"]
    assert main([*argv, "-m", "ndcg@10", "-m", "ndcg@10(gain=exponential)", "-m", "rbp", "-m", "rbp(p=0.5)"]) == 0
    out = json.loads(capsys.readouterr().out)["all"]
    expected = parse_output(base / "out.comment.test.aq")["all"]
    assert f"{out['ndcg@10']:.4f}" == parse_output(base / "out.comment.test.cuts.q")["all"]["ndcg_cut_10"]
    assert f"{out['rbp']:.4f}" == expected["rbp"]
    # graded 0-3 judgments: exponential gain and a lower persistence are different measures
    assert out["ndcg@10(gain=exponential)"] != pytest.approx(out["ndcg@10"])
    assert out["rbp(p=0.5)"] != pytest.approx(out["rbp"])


def test_cli_trec_bad_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    qrels = tmp_path / "q.txt"
    qrels.write_text("q1 0 d1 1\n")
    run = tmp_path / "r.txt"
    run.write_text("q1 Q0 d1 1 1.0 t\nq1 Q0 d2 x\n")
    assert main(["trec", str(qrels), str(run)]) == 2
    err = capsys.readouterr().err
    assert "r.txt:2: expected 6 fields" in err and "Traceback" not in err
    assert main(["trec", str(qrels), str(qrels), "-m", "nope@3"]) == 2


def test_retrieval_evaluator_agrees_with_evaluate_run(tmp_path: Path) -> None:
    from evret_core import Evaluator, evaluate_run
    from evret_core.retrieve.retrievers import PrecomputedRetriever

    dataset = EvaluationDataset.from_beir(
        _beir(tmp_path, "query-id\tcorpus-id\tscore\nq1\td1\t2\nq1\td3\t1\nq2\td2\t1\n")
    )
    run = {"q1": {"d2": 3.0, "d3": 2.0, "d1": 2.0, "d9": 1.0}, "q2": {"d1": 1.0, "d2": 1.0}}
    metrics = ["ndcg@3", "ap", "mrr", "precision@2", "bpref"]
    results = Evaluator(PrecomputedRetriever(run), metrics, k=10).evaluate(dataset)
    qrels = {q.query_id: q.relevance for q in dataset}
    expected = evaluate_run(qrels, run, metrics)
    for name in metrics:
        assert results.scores[name] == pytest.approx(expected[name], abs=1e-12)
