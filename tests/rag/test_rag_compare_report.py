"""RAG runs in evret compare and evret report: paired tests per score, and a Markdown or HTML report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evret_core.cli import main
from evret_core.rag import RagResults
from evret_core.report.rag_compare import compare_rag

from .conftest import EXAMPLE


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("rag")
    a, b = folder / "careful.json", folder / "shy.json"
    assert main(["rag", "--config", str(EXAMPLE / "rag.toml"), "--resamples", "50", "--output", str(a)]) == 0
    # a generator that refuses far more often: fewer right answers
    assert main(["rag", "--config", str(EXAMPLE / "rag.toml"), "--resamples", "50", "--generator-option",
                 "threshold=0.95", "--adversarial", "missing-gold", "--output", str(b)]) == 0
    return a, b


def test_compare_rag_tests_the_shared_scores_on_the_questions_both_measured(two_runs: tuple[Path, Path]) -> None:
    runs = {p.stem: RagResults.from_json(p) for p in two_runs}
    comparison = compare_rag(runs, test="t")
    metrics = {p.metric for p in comparison.pairs}
    assert {"retrieved/correct", "gold/f1", "retrieval/recall@5"} <= metrics
    assert not any(m.startswith("missing-gold/") for m in metrics)  # only one run has that condition
    refused = next(p for p in comparison.pairs if p.metric == "retrieved/refused")
    a, b = runs["careful"], runs["shy"]
    assert refused.delta == pytest.approx(b.generation["retrieved"]["refused"] - a.generation["retrieved"]["refused"])
    assert refused.delta > 0 and refused.n == len(a.per_question)


def test_cli_compare_and_report(two_runs: tuple[Path, Path], capsys: pytest.CaptureFixture[str],
                                tmp_path: Path) -> None:
    a, b = map(str, two_runs)
    assert main(["compare", a, b, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["runs"] == ["careful", "shy"] and data["comparisons"]
    out = tmp_path / "rag.md"
    assert main(["report", a, b, "--output", str(out)]) == 0
    text = out.read_text(encoding="utf-8")
    for heading in ("## careful", "## shy", "### Generation", "### Failure attribution", "### Slices by type",
                    "### Adversarial: missing-gold", "## Comparison"):
        assert heading in text
    page = tmp_path / "rag.html"
    assert main(["report", a, b, "--format", "html", "--output", str(page)]) == 0
    html = page.read_text(encoding="utf-8")
    assert html.startswith("<!DOCTYPE html>") and "Content-Security-Policy" in html
    for heading in ("<p><b>careful</b>: 13 questions", "<p><b>shy</b>: 13 questions", "<h2>Failure attribution</h2>",
                    "<h2>Comparison</h2>"):
        assert heading in html
    careful = RagResults.from_json(two_runs[0])
    recall = careful.retrieval["recall@5"]
    assert f"{recall:.3f}" in html and f"{recall:.3f}" in text  # the same numbers in both formats
    assert main(["report", a, "--format", "latex"]) == 2
    assert "RAG runs are reported as markdown or html" in capsys.readouterr().err


def test_report_escapes_texts_from_the_results_file(two_runs: tuple[Path, Path], tmp_path: Path) -> None:
    """Tag values and run names come from user files: a pipe must not break a Markdown table and markup must not
    reach the HTML page."""
    from evret_core.report.rag_compare import rag_html, rag_markdown

    results = RagResults.from_json(two_runs[0])
    tag = next(iter(results.slices))
    results.slices[tag] = {"a|b <script>alert(1)</script>": next(iter(results.slices[tag].values()))}
    runs = {"run|<b>x</b>": results}
    markdown, html = rag_markdown(runs), rag_html(runs)
    assert "a\\|b &lt;script&gt;" in markdown and "<script>alert" not in markdown
    assert "<script>alert" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<b>x</b>" not in html


def test_rag_and_retrieval_runs_do_not_mix(two_runs: tuple[Path, Path], tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    retrieval = tmp_path / "retrieval.json"
    assert main(["evaluate", "--config", str(EXAMPLE.parent / "eval.toml"), "--no-progress", "--output",
                 str(retrieval)]) == 0
    capsys.readouterr()
    assert main(["compare", str(two_runs[0]), str(retrieval)]) == 2
    assert "compare RAG runs" in capsys.readouterr().err
