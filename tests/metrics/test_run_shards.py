"""Run files scored in shards (evret_core.metrics.shards), in this process: cuts at query boundaries, the same
per-query values as evaluate_run on the whole run (to the last bits of float sums over chunks of another width),
a query split across shards and bad lines are errors naming the file."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from evret_core import evaluate_run, read_qrels, read_run
from evret_core.contracts.errors import EvretError
from evret_core.metrics.shards import evaluate_run_file, score_shard, shard_ranges
from evret_core.testing.shared_data import shared_data

METRICS = ["ndcg@10", "recall@100", "mrr@10", "ap", "num_ret", "bpref"]


def assert_same(got: dict[str, float], expected: dict[str, float]) -> None:
    assert got.keys() == expected.keys()
    for name, value in expected.items():
        assert got[name] == pytest.approx(value, rel=1e-12, abs=1e-15), name


@pytest.mark.parametrize(("qrels_name", "run_name"), [("qrels.test", "results.test"),
                                                      ("qrels.comment.test", "results.comment.test")])
@pytest.mark.parametrize("shards", [1, 2, 3, 8, 1000])
def test_shards_score_as_the_whole_run(qrels_name: str, run_name: str, shards: int) -> None:
    data = shared_data("datasets", "trec_eval", what="trec_eval's test suite")
    expected = evaluate_run(read_qrels(data / qrels_name), read_run(data / run_name), METRICS, per_query=True)
    ranges = shard_ranges(data / run_name, shards)
    assert ranges[0][0] == 0 and ranges[-1][1] == (data / run_name).stat().st_size
    assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:], strict=False))
    assert len(ranges) <= min(shards, len(read_run(data / run_name)))
    if shards == 2:
        assert len(ranges) == 2
    raw = (data / run_name).read_bytes()
    for (_, cut), _next in zip(ranges, ranges[1:], strict=False):  # never inside a query
        before, after = raw[:cut].splitlines()[-1].split()[0], raw[cut:].split(maxsplit=1)[0]
        assert before != after
    got = evaluate_run_file(data / qrels_name, data / run_name, METRICS, shards=shards)
    assert got.qids == list(expected)
    for qid, values in expected.items():
        assert_same(got.per_query(qid), values)
    assert_same(got.means(), evaluate_run(read_qrels(data / qrels_name), read_run(data / run_name), METRICS))
    assert len(got.shard_peak_rss) == len(ranges) and min(got.shard_peak_rss) > 0


def test_a_cut_moves_past_the_lines_of_its_query(tmp_path: Path) -> None:
    run = tmp_path / "run.trec"
    run.write_text("".join(f"q{q} Q0 d{d} {d} {d} t\n" for q in (1, 2, 3) for d in range(30)) + "# end\n")
    ranges = shard_ranges(run, 6)
    data = run.read_bytes()
    starts = [data[a : a + 3] for a, _ in ranges]
    assert starts == [b"q1 ", b"q2 ", b"q3 "]
    (tmp_path / "qrels").write_text("q2 0 d5 1\nq3 0 d1 2\n")
    middle = score_shard(str(run), *ranges[1], str(tmp_path / "qrels"), ["num_ret", "recall@10"])
    assert middle.qids == ["q2"] and middle.values["num_ret"].tolist() == [30.0] and middle.lines == 30


def test_a_query_in_two_shards_is_an_error(tmp_path: Path) -> None:
    run, qrels = tmp_path / "run.trec", tmp_path / "qrels"
    run.write_text("".join(f"q{q} Q0 d{i}_{d} {d} {d} t\n" for i, q in enumerate((1, 2, 1)) for d in range(30)))
    qrels.write_text("q1 0 d2_3 1\nq2 0 d1_4 1\n")
    with pytest.raises(EvretError, match=r"run\.trec: query 'q1' has lines in two parts of the file; sort"):
        evaluate_run_file(qrels, run, ["ndcg@10"], shards=3)
    one = evaluate_run_file(qrels, run, ["ndcg@10"], shards=1)  # one shard regroups it, as read_run does
    assert one.qids == ["q1", "q2"]
    assert np.allclose(one.values["ndcg@10"], list(map(lambda q: q["ndcg@10"], evaluate_run(
        read_qrels(qrels), read_run(run), ["ndcg@10"], per_query=True).values())))


def test_bad_input_names_the_file_and_line(tmp_path: Path) -> None:
    run, qrels = tmp_path / "run.trec", tmp_path / "qrels"
    run.write_text("q1 Q0 a 1 1 t\nq2 Q0 b 1 1 t\nq2 Q0 c 2 NaN t\n")
    qrels.write_text("q1 0 a 1\nq2 0 b 1\n")
    with pytest.raises(EvretError, match=r"run\.trec:3: score is NaN"):
        evaluate_run_file(qrels, run, ["ndcg@10"], shards=2)
    with pytest.raises(EvretError, match="no such qrels file"):
        evaluate_run_file(tmp_path / "nope", run, ["ndcg@10"])
    with pytest.raises(EvretError, match="shards must be a positive integer"):
        shard_ranges(run, 0)
    qrels.write_text("q9 0 a 1\n")
    run.write_text("q1 Q0 a 1 1 t\n")
    with pytest.raises(EvretError, match="share no query id"):
        evaluate_run_file(qrels, run, ["ndcg@10"])


@pytest.mark.parametrize("text", [
    "q1 0 a 1\nq2 0 b 2\nq1 0 c 0\nq3 0 a 1\n",
    "\ufeffq1 0 a 1\n# note\n\nq2\t0\tb\t2 \r\nq1 0 c 0",
    "q1 0 a 1\nq2 0 b 2 extra\n",
    "q1 0 a 1\nq1 0 a 2\n",
    "q2 0 a 1\nq2 0 a 2\nq1 0 b x\n",
    "q1 0 a 1\nq1 0 b nan\n",
    "q1 0 a\u00a0b 1\nq1 0 c\xff 1\n",
])
@pytest.mark.parametrize("block", [1 << 25, 9])
def test_shard_qrels_read_as_read_qrels(text: str, block: int, tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from evret_core.io import runcolumns
    from evret_core.metrics.shards import read_qrels_for

    monkeypatch.setattr(runcolumns, "_BLOCK", block)
    path = tmp_path / "qrels"
    path.write_bytes(text.encode("utf-8") if "\xff" not in text else text.encode("latin-1"))

    def outcome(read: object, keep: object) -> object:
        try:
            got = read(path, keep)  # type: ignore[operator]
        except EvretError as exc:
            return str(exc)
        return [(q, list(d.items())) for q, d in got.items()]

    # a set, dict or frozenset is checked by the compiled scan itself; a list is filtered after the read, and the
    # numpy path filters every kind after: the same queries, documents, order and errors
    wanted = ["q1", "q3"]
    outcomes = [outcome(read, keep) for read in (read_qrels_for, read_qrels)
                for keep in (set(wanted), dict.fromkeys(wanted), frozenset(wanted), wanted)]
    monkeypatch.setenv("EVRET_PURE_PYTHON", "1")
    outcomes.append(outcome(read_qrels, set(wanted)))
    assert all(o == outcomes[0] for o in outcomes), outcomes
    if text.startswith("q2 0 a 1\nq2 0 a 2"):  # the repeat is in q2, not kept: the bad grade after it is the error
        assert outcomes[0] == f"{path}:3: grade 'x' is not a number"


@pytest.mark.parametrize("shards", [1, 2, 5])
def test_complete_scores_the_judged_queries_missing_from_the_run(tmp_path: Path, shards: int) -> None:
    """trec_eval -c in shards: the run's queries, then the judged ones no shard saw, as evaluate_run does."""
    run = tmp_path / "run.trec"
    run.write_text("".join(f"q{q} Q0 d{d} {d} {30 - d} t\n" for q in (1, 3, 5, 7) for d in range(12)))
    qrels = tmp_path / "qrels"
    qrels.write_text("q9 0 d1 1\nq9 0 d2 0\nq1 0 d3 1\nq2 0 d4 2\nq2 0 d5 1\nq5 0 d0 1\nq8 0 d7 0\n")
    metrics = ["num_ret", "num_rel", "num_rel_ret", "recall@10", "ndcg@10", "bpref"]
    expected = evaluate_run(read_qrels(qrels), read_run(run), metrics, per_query=True, complete=True)
    got = evaluate_run_file(qrels, run, metrics, shards=shards, complete=True)
    assert got.qids == list(expected) == ["q1", "q5", "q9", "q2", "q8"]
    for qid, values in expected.items():
        assert_same(got.per_query(qid), values)
    assert got.per_query("q2")["num_rel"] == 2.0 and got.per_query("q2")["num_ret"] == 0.0
    plain = evaluate_run_file(qrels, run, metrics, shards=shards)
    assert plain.qids == ["q1", "q5"]


def test_complete_scores_a_run_that_shares_no_query(tmp_path: Path) -> None:
    (tmp_path / "run").write_text("x Q0 d1 1 1.0 t\n")
    (tmp_path / "qrels").write_text("q1 0 d1 1\n")
    with pytest.raises(EvretError, match=r"complete=True \(evret trec --complete\) scores every judged query"):
        evaluate_run_file(tmp_path / "qrels", tmp_path / "run", ["num_rel"])
    got = evaluate_run_file(tmp_path / "qrels", tmp_path / "run", ["num_rel", "num_ret"], complete=True)
    assert got.qids == ["q1"] and got.per_query("q1") == {"num_rel": 1.0, "num_ret": 0.0}


def test_shards_are_bounded_and_never_loop_over_empty_indexes(tmp_path: Path) -> None:
    """T03/T03b: --shards 10**18 ran for 34 minutes on a 1,500-line run; now an error at once, and a count up to the
    maximum costs one loop per query boundary, not one per shard index."""
    import time

    from evret_core.metrics.shards import MAX_SHARDS

    run = tmp_path / "run.trec"
    run.write_text("".join(f"q{q} Q0 d{d} {d} {d} t\n" for q in range(3) for d in range(2000)))
    for bad in (10**18, MAX_SHARDS + 1):
        with pytest.raises(EvretError, match=f"shards must be at most {MAX_SHARDS:,}"):
            shard_ranges(run, bad)
    started = time.process_time()
    ranges = shard_ranges(run, MAX_SHARDS)
    assert len(ranges) == 3 and time.process_time() - started < 2.0  # 3 queries: 3 ranges, not 10,000 seeks


def test_folders_and_empty_runs_are_clear_errors(tmp_path: Path) -> None:
    """T14, T14c, T09, T10: a folder as run or qrels, an empty or comments-only run, in shards."""
    run, qrels = tmp_path / "run.trec", tmp_path / "qrels"
    run.write_text("q1 Q0 a 1 1 t\n")
    qrels.write_text("q1 0 a 1\n")
    with pytest.raises(EvretError, match=f"^{tmp_path}: is a folder, not a file$"):
        evaluate_run_file(qrels, tmp_path, ["ndcg@10"], shards=2)
    with pytest.raises(EvretError, match=f"^{tmp_path}: is a folder, not a file$"):
        evaluate_run_file(tmp_path, run, ["ndcg@10"], shards=2)
    for text in ("", "# only a comment\n\n  \n"):
        run.write_text(text)
        for complete in (False, True):
            with pytest.raises(EvretError, match=r"run\.trec: the run file has no result lines"):
                evaluate_run_file(qrels, run, ["ndcg@10"], shards=2, complete=complete)
