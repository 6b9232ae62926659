"""RAG runs in evret compare and evret report: paired tests per score, and a Markdown report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evret_core.cli import main
from evret_core.rag import RagResults
from evret_core.rag.compare import compare_rag

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
    assert main(["report", a, "--format", "html"]) == 2
    assert "RAG runs are reported as markdown" in capsys.readouterr().err


def test_rag_and_retrieval_runs_do_not_mix(two_runs: tuple[Path, Path], tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    retrieval = tmp_path / "retrieval.json"
    assert main(["evaluate", "--config", str(EXAMPLE.parent / "eval.toml"), "--no-progress", "--output",
                 str(retrieval)]) == 0
    capsys.readouterr()
    assert main(["compare", str(two_runs[0]), str(retrieval)]) == 2
    assert "compare RAG runs" in capsys.readouterr().err
