"""read_run_columns: the same run (queries, documents, scores, tag, order) and the same errors as read_run, on
trec_eval's own run files and on hostile ones, read in one block or in tiny blocks (so that queries and bad
lines straddle block ends and bulk and line-by-line blocks mix); the Evaluator and evaluate_run give the same
scores on it as on the dict run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from evret_core import EvaluationDataset, Evaluator, QueryExample, evaluate_run, read_qrels, read_run
from evret_core.contracts.errors import EvretError
from evret_core.io import runcolumns
from evret_core.io.runcolumns import ColumnarRun, read_run_columns
from evret_core.testing.shared_data import shared_data

METRICS = ["ndcg@10", "recall@100", "mrr@10", "ap", "num_ret", "bpref"]
RUNS = [("qrels.test", "results.test"), ("qrels.comment.test", "results.comment.test"),
        ("qrels.test", "results.trunc")]


@pytest.fixture(params=[1 << 25, 64, 7], ids=["one-block", "64-byte-blocks", "7-byte-blocks"])
def block(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> int:
    monkeypatch.setattr(runcolumns, "_BLOCK", request.param)
    return int(request.param)


def same_run(expected: Any, got: ColumnarRun) -> None:
    assert list(got) == list(expected)  # queries in the order of their first line
    for qid, scores in expected.items():
        assert list(got[qid].items()) == list(scores.items())  # documents and scores in file order
    assert got.tag == expected.tag and len(got) == len(expected)


def outcome(read: Any, path: Path) -> Any:
    try:
        run = read(path)
    except EvretError as exc:
        return ("error", str(exc))
    return ("run", run.tag, [(q, list(d.items())) for q, d in run.items()])


@pytest.mark.parametrize(("qrels_name", "run_name"), RUNS)
def test_trec_eval_runs_read_the_same(qrels_name: str, run_name: str, block: int) -> None:
    data = shared_data("datasets", "trec_eval", what="trec_eval's test suite")
    expected, got = read_run(data / run_name), read_run_columns(data / run_name)
    same_run(expected, got)
    qrels = read_qrels(data / qrels_name)
    for complete in (False, True):
        assert evaluate_run(qrels, got, METRICS, per_query=True, complete=complete) == evaluate_run(
            qrels, expected, METRICS, per_query=True, complete=complete)


@pytest.mark.parametrize(("qrels_name", "run_name"), RUNS)
def test_the_evaluator_scores_a_columnar_run_as_the_dict_run(qrels_name: str, run_name: str) -> None:
    data = shared_data("datasets", "trec_eval", what="trec_eval's test suite")
    qrels = read_qrels(data / qrels_name)
    columns, dicts = read_run_columns(data / run_name), read_run(data / run_name)
    # the run's queries, one judged query it lacks (scored 0 with missing_queries="zero"), in an order of our own
    qrels["not-in-the-run"] = {"d1": 1.0}
    qids = sorted(q for q in qrels if q in dicts)[::-1] + ["not-in-the-run"]
    dataset = EvaluationDataset(queries=[QueryExample(query_id=q, query_text=f"query {q}", relevant_doc_ids=qrels[q])
                                         for q in qids])
    on = {"k": 1000, "missing_queries": "zero", "n_resamples": 50}
    a = Evaluator(columns, METRICS, **on).evaluate(dataset)
    b = Evaluator(dict(dicts), METRICS, **on).evaluate(dataset)
    assert a.scores == b.scores and a.intervals == b.intervals
    assert a.stats["missing_queries"] == b.stats["missing_queries"] == {
        "count": 1, "queries": ["not-in-the-run"], "counted_as": 0.0}
    assert {q: r.model_dump() for q, r in a.per_query.items()} == {q: r.model_dump() for q, r in b.per_query.items()}
    assert len(a.per_query[qids[0]].retrieved_ids) == len(dicts[qids[0]])


LINE = "{q} Q0 {d} 1 {s} tag\n"
HOSTILE = {
    "empty": "",
    "only comments and blanks": "# a comment\n\n   \n#q1 Q0 d1 1 1 x\n",
    "unsorted queries": "q2 Q0 a 1 3 t\nq1 Q0 b 1 2 t\nq3 Q0 c 1 1 t\n",
    "a query split across non-adjacent lines": "q1 Q0 a 1 3 t\nq2 Q0 b 1 2 t\nq1 Q0 c 2 1 t\nq2 Q0 d 2 1 t\n"
                                               "q3 Q0 e 1 1 t\nq1 Q0 f 3 0.5 t\n",
    "duplicate, adjacent": "q1 Q0 a 1 3 t\nq1 Q0 a 2 2 t\n",
    "duplicate, far apart": "q1 Q0 a 1 3 t\nq2 Q0 b 1 2 t\nq2 Q0 c 1 2 t\nq1 Q0 a 2 1 t\n",
    "two duplicates: the first line wins": "q2 Q0 z 1 1 t\nq1 Q0 a 1 3 t\nq1 Q0 a 2 2 t\nq2 Q0 z 2 1 t\n",
    "five fields": "q1 Q0 a 1 3 t\nq1 Q0 b 2 2\n",
    "five fields then seven": "q1 Q0 a 1 3\nq1 Q0 b 2 2 t x\n",
    "seven fields then five": "q1 Q0 a 1 3 t x\nq1 Q0 b 2 2\n",
    "score not a number": "q1 Q0 a 1 3 t\nq1 Q0 b 2 high t\n",
    "NaN score": "q1 Q0 a 1 3 t\nq1 Q0 b 2 nan t\n",
    "infinite and huge scores": "q1 Q0 a 1 inf t\nq1 Q0 b 2 -1e308 t\nq1 Q0 c 3 1e400 t\n",
    "extra fields": "q1 Q0 a 1 3 t more junk\nq1 Q0 b 2 2 t\n",
    "no final newline, CRLF, tabs": "q1\tQ0\ta\t1\t3\tt\r\nq1 Q0 b 2 2 t",
    "byte-order mark": "\ufeffq1 Q0 a 1 3 t\nq1 Q0 b 2 2 t\n",
    "not UTF-8": "q1 Q0 a 1 3 t\nq1 Q0 b\xff 2 2 t\n",
    "unicode whitespace splits fields": "q1 Q0 a\u00a0x 1 3 t\nq1\u2003Q0 b 2 2 t\nq2 Q0 c\x1cd 1 1 t\n",
    "non-ASCII ids": "q\u00e9 Q0 d\u00e9j\u00e0 1 3 t\nq\u00e9 Q0 \U0001f600 2 3 t\n",
    "# inside ids": "q#1 Q0 d#1 1 3 t\nq#1 Q0 #d 2 3 t\n",
    "huge ids": f"q1 Q0 {'x' * 300_000} 1 3 t\n{'q' * 200_000} Q0 d 1 2 t\nq1 Q0 {'y' * 300_000} 2 3 t\n",
    "ties": "q1 Q0 b 1 1 t\nq1 Q0 c 2 1 t\nq1 Q0 a 3 1.0 t\n",
}


@pytest.mark.parametrize("name", list(HOSTILE))
def test_hostile_files_read_as_read_run_reads_them(name: str, block: int, tmp_path: Path) -> None:
    path = tmp_path / "run.trec"
    text = HOSTILE[name]
    path.write_bytes(text.encode("latin-1") if name == "not UTF-8" else text.encode())
    expected = outcome(read_run, path)
    assert outcome(read_run_columns, path) == expected
    assert outcome(lambda p: read_run_columns(p, threads=2), path) == expected  # blocks scanned side by side
    assert outcome(lambda p: read_run(p, threads=3), path) == expected
    if name.startswith(("duplicate", "two duplicates", "five", "seven", "score not", "NaN", "not UTF-8")):
        assert expected[0] == "error" and f"{path}:" in expected[1]  # the hostile ones fail, naming file and line
    elif name != "empty":
        assert expected[0] == "run"


def test_a_large_mixed_file_in_small_blocks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Bulk blocks and line-by-line blocks (a comment, extra fields) mixed, queries interleaved now and then."""
    lines = []
    for q in range(300):
        for d in range(12):
            lines.append(f"q{q % 97} Q0 d{q}_{d} {d} {round((q * 7 + d * 3) % 11 / 3, 1)} run{q % 2}\n")
        if q % 50 == 7:
            lines.append("# a comment in the middle\n")
        if q % 80 == 3:
            lines.append(f"q{q} Q0 extra{q} 1 2.5 tag and more\n")
    path = tmp_path / "run.trec"
    path.write_text("".join(lines))
    for size in (1 << 25, 4096, 100):
        monkeypatch.setattr(runcolumns, "_BLOCK", size)
        same_run(read_run(path), read_run_columns(path))
        for threads in (2, 3):
            same_run(read_run(path), read_run_columns(path, threads=threads))


def test_byte_ranges_read_their_part_and_name_the_right_line(tmp_path: Path) -> None:
    path = tmp_path / "run.trec"
    path.write_text("q1 Q0 a 1 3 t\nq1 Q0 b 2 2 t\nq2 Q0 c 1 1 t\n# note\nq3 Q0 d 1 1 t\nq3 Q0 e 2 oops t\n")
    cut = path.read_bytes().index(b"q2")
    head = read_run_columns(path, 0, cut)
    assert dict(head.items()) == {"q1": {"a": 3.0, "b": 2.0}}
    with pytest.raises(EvretError, match=r"run\.trec:6: score 'oops' is not a number"):
        read_run_columns(path, cut)


def test_threads_read_byte_ranges_and_default_to_the_cpus_for_big_files(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "run.trec"
    path.write_text("".join(f"q{q} Q0 d{q}_{d} {d} {d / 7!r} t\n" for q in range(40) for d in range(25)))
    monkeypatch.setattr(runcolumns, "_BLOCK", 256)
    text = path.read_bytes()
    cut, stop = text.index(b"q7 "), text.index(b"q31 ")
    for threads in (1, 2, 4):
        part = read_run_columns(path, cut, stop, threads=threads)
        assert list(part) == [f"q{q}" for q in range(7, 31)] and part["q30"]["d30_3"] == 3 / 7
    for pure in ("0", "1"):  # refused on the compiled path and on the numpy path (which reads on one)
        monkeypatch.setenv("EVRET_PURE_PYTHON", pure)
        for bad in (0, -1, 1.5, True, "2"):
            for read in (read_run_columns, read_run, read_qrels):
                with pytest.raises(EvretError, match="threads must be a positive integer"):
                    read(path, threads=bad)  # type: ignore[operator]
    monkeypatch.delenv("EVRET_PURE_PYTHON")
    # one thread up to three blocks; past that one per CPU the process may use, at most 4
    monkeypatch.setattr(runcolumns.os, "sched_getaffinity", lambda pid: set(range(8)), raising=False)
    assert runcolumns.scan_threads(0, None, 3 * 256) == 1
    assert runcolumns.scan_threads(0, None, 3 * 256 + 1) == 4
    assert runcolumns.scan_threads(100, 100 + 3 * 256, 10**9) == 1  # a byte range: its own length
    monkeypatch.setattr(runcolumns.os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    assert runcolumns.scan_threads(0, None, 10**9) == 2


def test_columns_are_compact(tmp_path: Path) -> None:
    path = tmp_path / "run.trec"
    path.write_text("".join(f"q{q} Q0 doc{q}_{d} {d} {d / 7} t\n" for q in range(200) for d in range(100)))
    run = read_run_columns(path)
    assert run.nbytes / 20_000 < 25  # ids (~10 bytes) + score (8) + offsets per query
    assert run.positions(["q5", "nope", "q0"]).tolist() == [5, -1, 0]


def test_a_trec_run_file_given_to_the_evaluator_stays_columns(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from evret_core.evaluation.run_rows import ColumnarRows
    from evret_core.io.runs import read_retrieved

    path = tmp_path / "run.trec"
    path.write_text("".join(f"q{q} Q0 d{d} {d + 1} {d % 4} t\n" for q in range(3000) for d in range(20)))
    run = read_retrieved(path)
    assert isinstance(run, ColumnarRun)
    dataset = EvaluationDataset(queries=[QueryExample(query_id=f"q{q}", query_text="x", relevant_doc_ids=["d3"])
                                         for q in range(3000)])
    evaluator = Evaluator(run, ["mrr@10"], n_resamples=1)
    assert evaluator.retriever.run is run
    built: list[int] = []
    original = ColumnarRun.queries
    monkeypatch.setattr(ColumnarRun, "queries", lambda self, p: built.append(len(p)) or original(self, p))
    rows = evaluator.retrieve_rows(dataset)
    assert isinstance(rows, ColumnarRows) and built == []  # nothing built until the metrics ask
    results = evaluator.evaluate(dataset)
    assert built == [2048, 952]  # one chunk's dicts at a time
    # d3 scores 3, the top score; ties with d7, d11, d15, d19 are ranked by id descending: d7 d3 d19 d15 d11
    assert results.scores["mrr@10"] == pytest.approx(1 / 2)
    assert results.per_query["q5"].retrieved_ids[:5] == ["d7", "d3", "d19", "d15", "d11"]
