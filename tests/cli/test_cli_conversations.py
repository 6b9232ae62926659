"""``evret evaluate`` over a conversation dataset: the flags, their errors, gates on ``form/metric``, and the
terminal's numbers equal to the JSON's."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from evret_core.cli import main
from evret_core.results.conversation_results import ConversationResults
from evret_core.results.files import load_results

CORPUS = [
    ("lib", "court law library self help guides appeal forms staff"),
    ("costs", "losing party pays the costs of an appeal"),
    ("fees", "filing fees for an appeal can be waived"),
    ("deadline", "deadline to file an appeal is thirty days"),
    ("judge", "the judge decides the appeal after hearing"),
    ("tax", "tax refund status check online"),
    ("refund", "refund delays happen when returns have errors"),
    ("audit", "an audit letter asks for receipts"),
]

CONVERSATIONS = [
    {"conversation_id": "law", "tags": {"domain": "govt"}, "turns": [
        {"user": "can I use the court library for my appeal", "relevant_doc_ids": ["lib"]},
        {"user": "who pays if I win", "rewrite": "who pays the costs of an appeal if I win",
         "relevant_doc_ids": ["costs"]},
        {"user": "and the fees", "rewrite": "filing fees for an appeal", "relevant_doc_ids": ["fees"]}]},
    {"conversation_id": "tax", "tags": {"domain": "fiqa"}, "turns": [
        {"user": "where is my tax refund", "rewrite": "tax refund status", "relevant_doc_ids": ["tax"]},
        {"user": "why so slow", "rewrite": "why are refund delays so slow", "relevant_doc_ids": ["refund"]},
        {"user": "thanks"}]},
    {"conversation_id": "appeal", "tags": {"domain": "govt"}, "turns": [
        {"user": "how long do I have to appeal", "rewrite": "deadline to file an appeal",
         "relevant_doc_ids": ["deadline"]},
        {"user": "who decides it", "rewrite": "who decides the appeal", "relevant_doc_ids": ["judge"]}]},
]


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    dataset = tmp_path / "conversations.jsonl"
    dataset.write_text("".join(json.dumps(c) + "\n" for c in CONVERSATIONS), encoding="utf-8")
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"_id": i, "text": t}) + "\n" for i, t in CORPUS), encoding="utf-8")
    plain = tmp_path / "plain.jsonl"
    plain.write_text(json.dumps({"query_id": "q1", "query": "appeal fees", "relevant_doc_ids": ["fees"]}) + "\n",
                     encoding="utf-8")
    return {"dataset": dataset, "corpus": corpus, "plain": plain, "dir": tmp_path}


def evaluate(files: dict[str, Path], *extra: str) -> list[str]:
    return ["evaluate", "--dataset", str(files["dataset"]), "--corpus", str(files["corpus"]), "--retriever", "bm25",
            "--metric", "ndcg@3", "--metric", "recall@3", "--resamples", "200", "--no-progress", *extra]


def test_terminal_numbers_equal_the_json(files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    out = files["dir"] / "results.json"
    assert main(evaluate(files, "--forms", "last_turn,full_history,rewrite", "--output", str(out))) == 0
    printed = capsys.readouterr().out
    results = load_results(out, kind="conversation")
    assert isinstance(results, ConversationResults)
    assert results.forms == ["last_turn", "full_history", "rewrite"] and results.unit == "conversation"
    for form in results.forms:
        row = next(line for line in printed.splitlines() if line.startswith(form + " "))
        for metric in results.metrics:
            low, high = results.intervals[form][metric]
            assert f"{results.scores[form][metric]:.3f} [{low:.3f}, {high:.3f}]" in row
        assert f"{results.n[form]['turns']} / {results.n[form]['conversations']}" in row
    for d in results.differences:
        row = next(line for line in printed.splitlines()
                   if line.startswith(f"{d['b']} - {d['a']}") and f" {d['metric']} " in line)
        assert f"{d['mean']:+.3f} [{d['interval'][0]:+.3f}, {d['interval'][1]:+.3f}]" in row
    assert "paired over 3 conversations; randomization; Holm" in printed
    assert re.search(r"ndcg@3 by domain", printed)
    assert "note: 1 turns carry no labels: kept as history, not scored" in printed


def test_unit_test_and_all_pairs(files: dict[str, Path]) -> None:
    out = files["dir"] / "turns.json"
    assert main(evaluate(files, "--forms", "last_turn,full_history,rewrite", "--unit", "turn", "--test", "t",
                         "--all-pairs", "--baseline-form", "rewrite", "--history-turns", "1",
                         "--history-roles", "all", "--history-max-words", "5", "--output", str(out))) == 0
    results = load_results(out)
    assert isinstance(results, ConversationResults)
    assert (results.unit, results.test, results.baseline_form) == ("turn", "t", "rewrite")
    assert len(results.differences) == 3 * 2
    assert results.config["history"] == {"turns": 1, "roles": "all", "max_words": 5}
    assert results.per_turn["law:3"].forms["full_history"].query == "I win\nand the fees"  # 5 words: the current 3, the newest 2 before


@pytest.mark.parametrize(("flags", "message"), [
    (["--forms", "last_turn,history"], "unknown query form 'history'"),
    (["--forms", "last_turn", "--baseline-form", "rewrite"], "baseline form 'rewrite' is not one of the forms"),
    (["--forms", "last_turn,rewriter"], "the rewriter form needs a rewriter"),
    (["--rewriter-option", "x=1"], "--rewriter-option"),
    (["--fail-under", "rewriter/ndcg@3=0.5", "--forms", "last_turn,rewrite"], "--fail-under names rewriter/ndcg@3"),
    (["--history-max-words", "0"], "--history-max-words"),
])
def test_bad_flags_are_one_line_and_exit_2(files: dict[str, Path], capsys: pytest.CaptureFixture[str],
                                           flags: list[str], message: str) -> None:
    assert main(evaluate(files, *flags)) == 2
    # the reader's notes about the data (history-only turns) may come first; the error is one line
    err = [line for line in capsys.readouterr().err.strip().splitlines() if not line.startswith("note: ")]
    assert len(err) == 1 and message in err[0]


@pytest.mark.parametrize("flag", [["--forms", "last_turn"], ["--unit", "turn"], ["--all-pairs"],
                                  ["--rewriter", "carry-terms"], ["--qrels", "q.tsv"]])
def test_conversation_flags_on_a_plain_dataset_are_refused(files: dict[str, Path], capsys: pytest.CaptureFixture[str],
                                                           flag: list[str]) -> None:
    argv = ["evaluate", "--dataset", str(files["plain"]), "--retriever", "bm25", "--retriever-option",
            f"corpus={files['corpus']}", "--metric", "recall@3", "--no-progress", *flag]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"{flag[0]} applies to conversation datasets (a .jsonl of conversations with 'turns', or " \
           "--dataset-format mtrag)" in err


def test_gates_read_form_and_metric(files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    out = files["dir"] / "gated.json"
    assert main(evaluate(files, "--forms", "last_turn,rewrite", "--output", str(out),
                         "--fail-under", "rewrite/recall@3=0.01")) == 0
    assert "gates passed: rewrite/recall@3" in capsys.readouterr().err
    assert main(evaluate(files, "--forms", "last_turn,rewrite", "--fail-under", "rewrite/recall@3=1.01")) != 0
    assert "rewrite/recall@3" in capsys.readouterr().err


def test_output_over_an_input_is_refused_before_any_work(files: dict[str, Path],
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    before = files["corpus"].read_bytes()
    assert main(evaluate(files, "--output", str(files["corpus"]))) == 2
    assert files["corpus"].read_bytes() == before
    assert "--output" in capsys.readouterr().err


def test_report_and_compare_of_two_conversation_runs(files: dict[str, Path],
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    a, b = files["dir"] / "a.json", files["dir"] / "b.json"
    assert main(evaluate(files, "--forms", "last_turn,rewrite", "--output", str(a))) == 0
    assert main(evaluate(files, "--forms", "last_turn,rewrite", "--seed", "3", "--output", str(b))) == 0
    capsys.readouterr()
    assert main(["compare", str(a), str(b)]) == 0
    assert "rewrite/ndcg@3" in capsys.readouterr().out
    results: Any = load_results(a)
    for fmt in ("markdown", "html"):
        report = files["dir"] / f"report.{fmt}"
        assert main(["report", str(a), "--format", fmt, "--output", str(report)]) == 0
        text = report.read_text(encoding="utf-8")
        for form in results.forms:
            for metric in results.metrics:
                assert f"{results.scores[form][metric]:.3f}" in text
        for d in results.differences:
            assert f"{d['mean']:+.3f}" in text
    assert main(["report", str(a), "--format", "latex"]) == 2
    assert "conversation runs are reported as markdown or html" in capsys.readouterr().err
