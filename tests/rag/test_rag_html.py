"""The RAG HTML report's per-question drill-down (issue 27): question, contexts per condition (gold and planted
ones marked), answer, claims with verdicts and citations, attribution; escaped, and capped."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from evret_core.cli import main
from evret_core.rag import RagResults
from evret_core.report.rag_compare import rag_html
from evret_core.report.rag_document import question_drilldown

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
    assert html.count('<details class="q" ') == len(results.per_question) == 13
    # the entries are markup, readable without a script; the page's one script (and its filter index) only adds
    # the search, the filters and the sorting (tests/rag/test_rag_html_page.py)
    assert html.count("<script") == 2
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
    capped = rag_html({"run": results}).count('<details class="q" ')
    assert capped == 13


# -- context texts in the drill-down (--dataset / --corpus) ---------------------------------------------------------

def test_drilldown_shows_context_texts_with_the_question_set(adversarial_run: Path, tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    from evret_core.rag import QuestionSet

    page = tmp_path / "rag.html"
    assert main(["report", str(adversarial_run), "--format", "html", "--output", str(page),
                 "--dataset", str(EXAMPLE / "questions.jsonl"), "--corpus", str(EXAMPLE / "corpus.jsonl")]) == 0
    html = page.read_text(encoding="utf-8")
    assert "context texts (" in html and "--dataset QUESTIONS" not in html
    questions = QuestionSet.load(EXAMPLE / "questions.jsonl", EXAMPLE / "corpus.jsonl")
    results = RagResults.from_json(adversarial_run)
    q = next(q for q in results.per_question.values() if "planted_answer" in q.conditions["counterfactual"].info)
    entry = html[html.index(f"<b>{q.question_id}</b>"):]
    entry = entry[: entry.index('<div class="run">', entry.index("context texts ("))]
    store = html[html.index('<section id="texts">'):]

    def text_of(doc_id: str) -> str:
        """The stored text an entry's context links to, whole."""
        row = entry[entry.index(f"<b>{doc_id}</b>"):]
        ref = re.search(r'<a href="#t-(\d+)">', row[: row.index("</li>")])
        assert ref, row[:200]
        stored = store[store.index(f'<li id="t-{ref.group(1)}">'):]
        return stored[: stored.index("</li>")]

    gold = q.gold_doc_ids[0]
    assert f"<b>{gold}</b> <span class=\"tag\">gold</span>" in entry
    assert (questions.text_of(gold) or "")[:60] in entry  # a preview in the question's entry
    assert html_text(questions.text_of(gold) or "") in text_of(gold)  # the whole text at the page's end
    info = q.conditions["counterfactual"].info
    forged = text_of(str(info["forged_doc"]))
    assert str(info["planted_answer"]) in forged  # the forged text, rebuilt
    canary = q.conditions["injection"].info["canary"]
    assert canary in text_of(q.conditions["injection"].info["injected_docs"][0])  # from its template and canary
    plain = tmp_path / "plain.html"
    assert main(["report", str(adversarial_run), "--format", "html", "--output", str(plain)]) == 0
    assert "--dataset QUESTIONS" in plain.read_text(encoding="utf-8")  # says how to get the texts


def html_text(text: str) -> str:
    from markupsafe import escape

    return str(escape(text))


def test_context_texts_are_escaped(adversarial_run: Path, tmp_path: Path) -> None:
    from evret_core.rag import QuestionSet

    questions = QuestionSet.load(EXAMPLE / "questions.jsonl", EXAMPLE / "corpus.jsonl")
    results = RagResults.from_json(adversarial_run)
    gold = results.per_question["r01"].gold_doc_ids[0]
    questions.corpus[gold] = {"text": "Opening hours </span></details><script>alert('x')</script> & more"}
    results.config["question_set"] = questions.fingerprint()  # a run that saw this text (else it is refused)
    html = rag_html({"run": results}, questions=questions)
    assert "<script>alert" not in html
    assert "Opening hours &lt;/span&gt;&lt;/details&gt;&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; more" in html


def test_a_question_set_of_another_run_is_refused(adversarial_run: Path, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    other = tmp_path / "q.jsonl"
    other.write_text('{"question_id": "zz1", "question": "Why?", "expected_behaviour": "refuse"}\n',
                     encoding="utf-8")
    assert main(["report", str(adversarial_run), "--format", "html", "--dataset", str(other)]) == 2
    assert f"--dataset {other}: the question set holds none of the 13 questions of run 'run'" in capsys.readouterr().err
    assert main(["report", str(adversarial_run), "--format", "markdown", "--dataset", str(other)]) == 2
    assert main(["report", str(adversarial_run), "--format", "html", "--corpus", str(other)]) == 2


def test_a_large_run_with_texts_stays_within_the_page_budget(capsys: pytest.CaptureFixture[str]) -> None:
    """1,500 questions x 4 conditions x 5 contexts of 2,000 characters each (15 MB of distinct text): the page
    holds 1,000 questions, every context text cut to one length, and at most 5,000,000 bytes."""
    import random

    from evret_core.rag import QuestionSet, RagQuestion
    from evret_core.results.rag_results import ConditionOutcome, QuestionOutcome

    rng = random.Random(0)
    words = ["river", "bridge", "<tag>", "&", "caf\u00e9", "1932", "north", "opened", "the", "a"]
    corpus = {f"d{i}": {"text": " ".join(rng.choice(words) for _ in range(330))[:2000]} for i in range(7500)}
    rows, per = [], {}
    for i in range(1500):
        docs = [f"d{(5 * i + j) % 7500}" for j in range(5)]
        rows.append(RagQuestion(question_id=f"q{i}", question=f"Question {i}?", answers=[["x"]], gold_doc_ids=docs[:1]))
        per[f"q{i}"] = QuestionOutcome(
            question_id=f"q{i}", question=f"Question {i}?", expected_behaviour="answer", answers=[["x"]],
            gold_doc_ids=docs[:1],
            conditions={c: ConditionOutcome(context_ids=docs[: 5 - n], expected_behaviour="answer", correct=n == 0)
                        for n, c in enumerate(("gold", "retrieved", "missing-gold", "irrelevant-only"))})
    results = RagResults(conditions=["gold", "retrieved", "missing-gold", "irrelevant-only"], per_question=per)
    warnings: list[str] = []
    html = rag_html({"run": results}, questions=QuestionSet(questions=rows, corpus=corpus, name="big"),
                    warnings=warnings)
    size = len(html.encode("utf-8"))
    assert 4_500_000 < size <= 5_000_000  # the texts use what the page leaves
    assert html.count('<details class="q" ') == 1000 and html.count('<details class="texts">') == 1000
    cut = re.search(r"(\d+) of (\d+) distinct context texts are cut to (\d+) characters", html)
    assert cut and int(cut.group(2)) == 5000 and 0 < int(cut.group(3)) < 2000
    assert html.count('<li id="t-') == 5000  # each distinct text once, however many questions share it
    assert any("context texts are cut" in w for w in warnings)
    assert "&lt;tag&gt;" in html and "<tag>" not in html
