"""What a newcomer's first runs print about themselves: which judge decided the matches when none was named, no
warning about the bundled example's own questions to refuse, how `evret plugins` names output evaluators, and
the HTML report's header (runs, then the dataset)."""

from __future__ import annotations

from pathlib import Path

import pytest

from evret_core.cli import main

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"


@pytest.fixture
def bm25() -> None:
    pytest.importorskip("evret_bm25", reason="the bundled examples use evret-bm25")


def test_evaluate_says_which_judge_it_used_when_none_was_named(bm25: None, capsys: pytest.CaptureFixture[str]
                                                                ) -> None:
    base = ["evaluate", "--dataset", str(EXAMPLES / "dataset.jsonl"), "--retriever", "bm25", "--retriever-option",
            f"corpus={EXAMPLES / 'corpus.jsonl'}", "--metric", "recall@5", "--no-progress"]
    assert main(base) == 0
    err = capsys.readouterr().err
    assert "default judge, contains" in err and "--judge token-overlap" in err
    assert main([*base, "--judge", "contains"]) == 0  # named: nothing to explain
    assert "default judge" not in capsys.readouterr().err
    assert main(["evaluate", "--config", str(EXAMPLES / "eval.toml"), "--no-progress"]) == 0
    assert "default judge" not in capsys.readouterr().err  # the example's TOML names the judge it needs


def test_the_bundled_rag_example_prints_no_note_about_its_own_questions(bm25: None,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["rag", "--config", str(EXAMPLES / "rag" / "rag.toml")]) == 0
    captured = capsys.readouterr()
    notes = [line for line in (captured.out + captured.err).splitlines() if line.startswith(("note:", "WARNING"))]
    # the notes on how 'correct' was decided and on the extractive generator's fixed scores are the run's, by design
    assert all(line.startswith(("note: 'correct' decided by", "note: groundedness, faithfulness")) for line in notes)
    assert "have no gold ids" not in captured.out + captured.err
    assert "retrieval (retrieved condition; 95% CI; 9 of 13 questions, the 4 to refuse or escalate have no gold)" in captured.out


def test_plugins_names_output_evaluators_as_the_docs_do(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plugins", "--all"]) == 0
    out = capsys.readouterr().out
    assert "  output evaluators: direct, pairwise" in out and "  evaluators:" not in out
    readme = (REPO / "README.md").read_text()
    assert "criteria judges `direct` and `pairwise`" in readme and "as output\nevaluators" in readme


def test_the_html_report_header_names_the_runs_then_the_dataset(bm25: None, tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    for name in ("first", "second"):
        assert main(["evaluate", "--config", str(EXAMPLES / "eval.toml"), "--no-progress",
                     "--output", str(tmp_path / f"{name}.json")]) == 0
    report = tmp_path / "report.html"
    assert main(["report", str(tmp_path / "first.json"), str(tmp_path / "second.json"), "--format", "html",
                 "--output", str(report)]) == 0
    assert "<p>runs: first, second; dataset: dataset (22 queries)</p>" in report.read_text()
