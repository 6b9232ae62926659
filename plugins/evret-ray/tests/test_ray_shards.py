"""Run-file shards on a local Ray cluster (2 CPUs, usage stats off): each task reads its own byte range and its
queries' qrels; the per-query values equal the in-process sharded path exactly and evaluate_run on the whole run
(to float rounding); a worker's bad-line error reads as it would locally."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from evret_ray.executor import RayExecutor

from evret_core import evaluate_run, read_qrels, read_run
from evret_core.metrics.shards import evaluate_run_file
from evret_core.sdk import EvretError
from evret_core.testing.shared_data import shared_data

METRICS = ["ndcg@10", "recall@100", "mrr@10", "ap", "bpref"]


def trec_eval_dir() -> Path:
    return shared_data("datasets", "trec_eval", what="trec_eval's test suite")


def test_shards_on_ray_equal_the_local_path() -> None:
    data = trec_eval_dir()
    qrels, run = data / "qrels.comment.test", data / "results.comment.test"
    local = evaluate_run_file(qrels, run, METRICS, shards=5)
    on_ray = evaluate_run_file(qrels, run, METRICS, shards=5, executor=RayExecutor(workers=2))
    assert on_ray.qids == local.qids
    for name in METRICS:
        assert on_ray.values[name].tolist() == local.values[name].tolist()  # the same shards: exact
    whole = evaluate_run(read_qrels(qrels), read_run(run), METRICS, per_query=True)
    assert on_ray.qids == list(whole)
    for qid, values in whole.items():
        got = on_ray.per_query(qid)
        assert all(got[m] == pytest.approx(v, rel=1e-12, abs=1e-15) for m, v in values.items())
    # measured inside the tasks, on the workers: each shard's process reports its own peak memory
    assert len(on_ray.shard_peak_rss) == 5 and min(on_ray.shard_peak_rss) > 10 << 20
    assert os.getpid() not in on_ray.shard_pids and set(local.shard_pids) == {os.getpid()}


def test_a_bad_line_read_on_a_worker_names_the_file_and_line(tmp_path: Path) -> None:
    run, qrels = tmp_path / "run.trec", tmp_path / "qrels"
    run.write_text("".join(f"q{q} Q0 d{d} {d} {d} t\n" for q in range(4) for d in range(5)) + "q9 Q0 x 1 NaN t\n")
    qrels.write_text("q1 0 d2 1\n")
    with pytest.raises(EvretError, match=r"run\.trec:21: score is NaN"):
        evaluate_run_file(qrels, run, ["ndcg@10"], shards=3, executor=RayExecutor(workers=2))


def test_evret_trec_cli_scores_shards_on_ray(capsys: pytest.CaptureFixture[str]) -> None:
    """``evret trec --executor ray --shards N`` prints the table the in-process command prints, complete included."""
    from evret_core.cli import main

    data = trec_eval_dir()
    argv = ["trec", str(data / "qrels.comment.test"), str(data / "results.comment.test"), "--per-query", "-c"]
    assert main(argv) == 0
    whole = capsys.readouterr().out
    assert main([*argv, "--executor", "ray", "--executor-option", "workers=2", "--shards", "4"]) == 0
    assert capsys.readouterr().out == whole
