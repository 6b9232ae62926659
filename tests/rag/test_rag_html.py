"""The RAG HTML report's per-question drill-down (issue 27): question, contexts per condition (gold and planted
ones marked), answer, claims with verdicts and citations, attribution; escaped, and capped."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from evret_core.cli import main
from evret_core.rag import RagResults
from evret_core.rag.compare import rag_html
from evret_core.rag.document import question_drilldown

from .conftest import EXAMPLE


@pytest.fixture(scope="module")
def adversarial_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("rag") / "run.json"
    assert main(["rag", "--config", str(EXAMPLE / "rag.toml"), "--resamples", "20", "--adversarial",
                 "counterfactual,injection", "--output", str(out)]) == 0
    return out


def test_html_report_has_a_drilldown_per_question(adversarial_run: Path, tmp_path: Path) -> None:
    page = tmp_path / "rag.html"
    assert main(["report", str(adversarial_run), "--format", "html", "--output", str(page)]) == 0
    html = page.read_text(encoding="utf-8")
    results = RagResults.from_json(adversarial_run)
    assert html.count('<details class="q">') == len(results.per_question) == 13
    assert "<script" not in html  # the drill-down needs no script (the page's policy forbids them)
    q = next(q for q in results.per_question.values() if "planted_answer" in q.conditions["counterfactual"].info
             and q.conditions["retrieved"].claims)
    entry = html[html.index(f"<b>{q.question_id}</b>"):]
    entry = entry[: entry.index("</details>")]
    assert q.question in entry and "attribution: " + str(q.attribution) in entry
    for condition in ("gold", "retrieved", "counterfactual", "injection"):
        assert f"<b>{condition}</b>" in entry
    assert "(gold)" in entry and "(planted)" in entry  # the gold context and the forged / injected ones
    claim = q.conditions["retrieved"].claims[0]
    assert f"{claim.verdict}: <span class=\"doctext\">{claim.claim}</span>" in entry
    assert f"cites {', '.join(claim.citations)}" in entry
    assert "planted_answer: " + str(q.conditions["counterfactual"].info["planted_answer"]) in entry
    assert re.search(r"adversarial scores: adopted \d", entry)


def test_drilldown_escapes_and_caps(adversarial_run: Path) -> None:
    results = RagResults.from_json(adversarial_run)
    hostile = results.per_question["r03"].model_copy(deep=True)
    hostile.question = "<script>alert(1)</script> & co"
    results.per_question["r03"] = hostile
    html = rag_html({"run": results})
    assert "<script>alert(1)" not in html and "&lt;script&gt;alert(1)&lt;/script&gt; &amp; co" in html
    assert len(question_drilldown({"run": results}, limit=5)) == 5
    capped = rag_html({"run": results}).count('<details class="q">')
    assert capped == 13
