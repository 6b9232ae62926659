"""The HTML report stays within 5 MB whatever the data, and says what it cut (red-team R10: 24.2 MB with 72k
distinct 1 KB texts, because each text kept at least 300 characters)."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest

from evret_core import EvaluationDataset, EvaluationResults, Evaluator, QueryExample
from evret_core.cli import main
from evret_core.report import build_report_data
from evret_core.report.drilldown import PAGE_BUDGET, script_json, text_cap
from evret_core.report.html import MANIFEST_CHARS, render_html

QUERIES = 450  # x 2 runs x 20 distinct 1 KB texts: 18,000 texts, 6.2 MB with the old 300-character floor
WORDS = ["alpha", "beta", "gamma", "delta", "omicron", "sigma", "tau", "upsilon", "phi", "chi", "psi", "omega"]


@pytest.fixture(scope="module")
def worst_runs() -> dict[str, EvaluationResults]:
    """R10 scaled down: every retrieved document of every query of every run is a distinct 1 KB text."""
    rng = random.Random(0)
    dataset = EvaluationDataset(name="r10", queries=[
        QueryExample(query_id=f"q{i:05d}", query_text=f"question {i} about things", relevant_doc_ids=[f"a-{i}-0"])
        for i in range(QUERIES)])
    runs = {}
    for run in ("a", "b"):
        docs = {q.query_text: [{"doc_id": f"{run}-{q.query_id[1:].lstrip('0') or '0'}-{k}", "score": 20.0 - k,
                                "text": " ".join(rng.choice(WORDS) for _ in range(200))[:1000]} for k in range(20)]
                for q in dataset.queries}

        def retrieve(query: str, k: int, docs: dict[str, list[dict[str, object]]] = docs) -> list[dict[str, object]]:
            return docs[query][:k]

        runs[run] = Evaluator(retrieve, ["recall@20", "ndcg@10"], n_resamples=50, seed=0).evaluate(dataset)
    return runs


def drill(html: str) -> dict[str, object]:
    block = re.search(r'<script type="application/json" id="evret-data">(.*?)</script>', html, re.S)
    assert block
    value: dict[str, object] = json.loads(block.group(1))
    return value


def test_distinct_texts_are_cut_to_fit_and_the_cut_is_said(worst_runs: dict[str, EvaluationResults],
                                                            tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    files = []
    for name, results in worst_runs.items():
        files.append(str(tmp_path / f"{name}.json"))
        results.to_json(files[-1])
    page = tmp_path / "report.html"
    assert main(["report", *files, "--format", "html", "--output", str(page)]) == 0
    assert page.stat().st_size <= PAGE_BUDGET, page.stat().st_size
    html = page.read_text(encoding="utf-8")
    data = drill(html)
    assert len(data["queries"]) == QUERIES and data["total"] == QUERIES  # type: ignore[arg-type]
    texts, lengths, cap = data["texts"], data["lengths"], data["cap"]
    assert len(texts) == 2 * QUERIES * 20 and isinstance(cap, int) and 0 < cap < 300  # type: ignore[arg-type]
    assert all(len(t) == min(n, cap) for t, n in zip(texts, lengths, strict=True))  # type: ignore[call-overload]
    note = f"18000 of 18000 distinct document texts are cut to {cap} characters"
    assert "Cut to fit the 5 MB page:</strong> " + note in html
    err = capsys.readouterr().err
    assert f"WARNING: HTML report: {note}" in err


def test_when_the_queries_alone_do_not_fit_the_first_ones_are_kept(worst_runs: dict[str, EvaluationResults]) -> None:
    data = build_report_data(worst_runs)
    html = render_html(data, data_budget=150_000)
    value = drill(html)
    shown = len(value["queries"])  # type: ignore[arg-type]
    assert 0 < shown < QUERIES and value["total"] == QUERIES
    assert len(script_json(value).encode()) <= 150_000
    assert [q["id"] for q in value["queries"]] == list(worst_runs["a"].per_query)[:shown]  # type: ignore[union-attr]
    assert any(f"holds the first {shown} of {QUERIES} queries" in w for w in data.warnings)
    assert f"{shown} of {QUERIES} queries" in html


def test_a_huge_manifest_is_cut(worst_runs: dict[str, EvaluationResults]) -> None:
    run = worst_runs["a"].model_copy()
    assert run.manifest is not None
    run.manifest = run.manifest.model_copy(update={"retriever": {"blob": "x" * 6_000_000}})
    data = build_report_data({"huge": run})
    html = render_html(data)
    assert len(html.encode()) <= PAGE_BUDGET
    assert any(f"manifest of run 'huge' is cut to {MANIFEST_CHARS:,} characters" in w for w in data.warnings)


def test_text_cap_has_no_floor() -> None:
    texts = ["a" * n for n in (50, 400, 900, 3000, 12000)] + ["é" * 2000]
    cap = text_cap(texts, 600)
    assert cap is not None and cap < 300
    assert sum(len(t[:cap].encode()) for t in texts) <= 600 < sum(len(t[:cap + 1].encode()) for t in texts)
    assert text_cap(texts, 3) == 0


def test_a_tag_per_query_does_not_draw_a_bar_per_query() -> None:
    """A tag holding an id (one slice per query) drew 2,000 x 3 metrics x 2 runs bars: now the largest values."""
    dataset = EvaluationDataset(name="tags", queries=[
        QueryExample(query_id=f"q{i}", query_text=f"question {i}", relevant_doc_ids=["a"],
                     tags={"uid": f"value-{i}", "half": "even" if i % 2 else "odd"}) for i in range(2000)])
    runs = {name: Evaluator(lambda q, k: [{"doc_id": "a"}], ["recall@1", "ndcg@10", "mrr@10"], n_resamples=20,
                            seed=0).evaluate(dataset) for name in ("a", "b")}
    data = build_report_data(runs)
    html = render_html(data)
    assert len(html.encode()) <= PAGE_BUDGET
    slices = re.search(r'<section id="slices">.*?</section>', html, re.S)
    assert slices and slices.group(0).count('class="slabel"') == 3 * (50 + 2)  # per metric: 50 uid values, 2 halves
    assert "HTML report: the slices of tag 'uid' show its 50 largest of 2000 values" in data.warnings
    assert not any("'half'" in w for w in data.warnings)
