"""Docs that state what the code computes, checked against it: the reference example's token-overlap scores
(docs/concepts.md)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from evret_core import JudgmentContext, create_judge

ROOT = Path(__file__).resolve().parents[2]


def test_the_reference_example_states_the_judges_scores() -> None:
    text = (ROOT / "docs" / "concepts.md").read_text(encoding="utf-8")
    example = text[text.index("The reference example"):]
    example = example[:example.index("\n\n")]
    stated = [(int(a), int(b), float(v)) for a, b, v in re.findall(r"score\s+(\d+)/(\d+)\s+=\s+([\d.]+)", example)]
    judge = create_judge("token-overlap")
    retrieved = "RAG is a technique that combines retrieval with generation"
    answers = ["RAG combines retrieval with generation for better accuracy",
               "Retrieval-augmented generation improves LLM responses"]
    contexts = [JudgmentContext(query="What is RAG?", expected_text=a, retrieved_text=retrieved) for a in answers]
    scores = judge.batch_score(contexts)
    assert len(stated) == 2
    for (shared, evidence, value), score in zip(stated, scores, strict=True):
        assert score == pytest.approx(shared / evidence, abs=1e-12) and value == pytest.approx(shared / evidence)
    assert judge.batch_judge(contexts) == [True, False]
    assert "score 3/5 = 0.6 ≥ 0.6, a match" in example and "no match" in example


def _test_option(command: str) -> str | None:
    words = command.split()
    return words[words.index("--test") + 1] if "--test" in words else None


def test_compare_and_report_show_one_test_in_the_readme_and_by_default() -> None:
    from evret_core.cli import build_parser

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    compares = [line for line in readme.splitlines() if line.startswith("evret compare ")]
    reports = [line for line in readme.splitlines() if line.startswith("evret report ") and line.count(".json") > 1]
    assert compares and reports
    assert {_test_option(c) for c in compares + reports} == {_test_option(compares[0])}  # one test on both
    sub = next(a for a in build_parser()._actions if hasattr(a, "choices") and a.choices and "compare" in a.choices)
    defaults = {name: next(a.default for a in sub.choices[name]._actions if "--test" in a.option_strings)
                for name in ("compare", "report")}
    assert defaults == {"compare": "t", "report": "t"}
    assert "a t-test by default" in readme


def test_the_readme_p_value_is_what_compare_and_the_page_show(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import shutil

    from evret_core.cli import main

    pytest.importorskip("evret_bm25")
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    monkeypatch.chdir(tmp_path)
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    stated = re.search(r"p = (0\.\d{4}) in the terminal and on the page", readme)
    assert stated is not None
    for extra in ([], ["--matching", "any_match"]):
        name = "results-any.json" if extra else "results.json"
        assert main(["evaluate", "--config", "examples/eval.toml", *extra, "--output", name, "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["compare", "results.json", "results-any.json"]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("recall@5 ") and " vs " in line)
    assert row.split()[5] == stated.group(1)
    assert main(["report", "results.json", "results-any.json", "--format", "html", "--output", "report.html"]) == 0
    assert stated.group(1) in (tmp_path / "report.html").read_text(encoding="utf-8")
