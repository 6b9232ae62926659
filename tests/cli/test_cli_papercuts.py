"""Smaller CLI papercuts of issue 33: the depth a metric without a cutoff reads, the --corpus hint of a run without
texts, swapped ``evret trec`` files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evret_core.cli import main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
BM25 = ["evaluate", "--dataset", str(EXAMPLES / "dataset.jsonl"), "--retriever", "bm25",
        "--retriever-option", f"corpus={EXAMPLES / 'corpus.jsonl'}", "--judge", "token-overlap", "--no-progress"]


@pytest.mark.parametrize(("flags", "k", "named"), [
    (["--metric", "recall", "--metric", "mrr"], 100, "recall, mrr"),            # the default depth
    (["--metric", "recall", "--metric", "ndcg@10"], 10, "recall"),              # the largest cutoff
    (["--metric", "precision", "--metric", "ndcg@10", "--k", "20"], 20, "precision"),  # --k
])
def test_a_metric_without_a_cutoff_says_the_depth_it_read(
        flags: list[str], k: int, named: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out_file = tmp_path / "r.json"
    assert main([*BM25, *flags, "--output", str(out_file)]) == 0
    out = capsys.readouterr().out
    data = json.loads(out_file.read_text())
    assert data["config"]["k"] == k  # the JSON's depth is the one the table names
    assert (f"{named}: no cutoff, so over each query's top {k} retrieved documents (retrieval depth k={k})"
            in out.splitlines())


def test_every_metric_with_a_cutoff_needs_no_note(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*BM25, "--metric", "recall@5"]) == 0
    assert "no cutoff" not in capsys.readouterr().out


def test_a_trec_run_without_corpus_on_text_labels_names_corpus(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "run.trec"
    run.write_text("q01 Q0 bee-002 1 2.0 bm25\nq01 Q0 bee-003 2 1.0 bm25\n", encoding="utf-8")
    argv = ["evaluate", "--dataset", str(EXAMPLES / "dataset.jsonl"), "--run", str(run), "--metric", "recall@2",
            "--missing-queries", "zero", "--no-progress"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "retrieved document 'bee-002' (rank 1) has no text" in err
    assert "give --corpus CORPUS.jsonl" in err
    assert main([*argv, "--corpus", str(EXAMPLES / "corpus.jsonl")]) == 0  # which is the fix


def test_swapped_trec_files_are_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    qrels, run = tmp_path / "qrels", tmp_path / "run"
    qrels.write_text("q1 0 d1 1\nq1 0 d2 0\n", encoding="utf-8")
    run.write_text("q1 Q0 d1 1 2.5 tag\nq1 Q0 d2 2 1.5 tag\n", encoding="utf-8")
    assert main(["trec", str(qrels), str(run), "-m", "ap"]) == 0
    capsys.readouterr()
    for extra in ([], ["--shards", "1"]):
        assert main(["trec", str(run), str(qrels), "-m", "ap", *extra]) == 2
        err = capsys.readouterr().err
        assert "expected 4 fields" in err or "expected 6 fields" in err  # the sharded path reads the run first
        assert (f"{run} looks like a run file and {qrels} like qrels: the files may be swapped "
                f"(evret trec QRELS RUN)") in err


def test_a_bad_qrels_file_that_is_not_a_swap_gets_no_swap_hint(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad, run = tmp_path / "qrels", tmp_path / "run"
    bad.write_text("q1 0 d1 1 extra\n", encoding="utf-8")
    run.write_text("q1 Q0 d1 1 2.5 tag\n", encoding="utf-8")
    assert main(["trec", str(bad), str(run)]) == 2
    assert "swapped" not in capsys.readouterr().err
