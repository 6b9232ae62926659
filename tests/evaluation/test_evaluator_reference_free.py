"""Evaluating queries without expected answers: refused before retrieval with a judge that needs answers; graded by
a judge that needs none (``reference_free``), each query then scored exactly as an id-labelled one with the grades."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from evret_core import hookimpl
from evret_core.contracts.errors import EvretError
from evret_core.contracts.judge import Judge, JudgmentContext
from evret_core.contracts.provider import ChatMessage, LLMProvider, LLMResponse
from evret_core.contracts.retrieve import RetrievalResult
from evret_core.evaluation.config import EvaluateConfig
from evret_core.evaluation.evaluator import Evaluator, UnmeasuredJudgmentsError
from evret_core.io.datasets import EvaluationDataset
from evret_core.judge.llm import LLMJudge
from evret_core.metrics.engine import evaluate_run
from evret_core.plugins.loading import register_plugin
from evret_core.results.files import load_results

# word counts 5..60: LengthGrade grades them 0, 1, 2, 3, 3, ...
DOCS = {f"d{n}": " ".join(["word"] * (5 + 7 * n)) for n in range(9)}
DOCS["dskip"] = "SKIP " + " ".join(["word"] * 30)  # a grade LengthGrade cannot give: unmeasured


class LengthGrade(Judge):
    """A graded judge that needs no expected answer: grade = words // 10, capped at 3; a text holding SKIP is
    unmeasured. Records every context it is asked about."""

    name = "length-grade"
    reference_free = True
    grades = 3
    cut = 2

    def __init__(self) -> None:
        self.seen: list[JudgmentContext] = []

    def _grade(self, context: JudgmentContext) -> float | None:
        self.seen.append(context)
        if "SKIP" in context.retrieved_text:
            return None
        return float(min(3, len(context.retrieved_text.split()) // 10))

    def judge(self, context: JudgmentContext) -> bool:
        grade = self._grade(context)
        return grade is not None and grade >= 2

    def batch_grade(self, contexts: Sequence[JudgmentContext]) -> list[float | None]:
        return [self._grade(c) for c in contexts]


class Retriever:
    """Each query's ranking is given; every call is counted."""

    def __init__(self, rankings: dict[str, list[str]]) -> None:
        self.rankings = rankings
        self.calls = 0

    def retrieve(self, query: str, k: int) -> list[RetrievalResult]:
        self.calls += 1
        ids = self.rankings[query][:k]
        return [RetrievalResult(doc_id=d, score=float(len(ids) - r), metadata={"text": DOCS[d]})
                for r, d in enumerate(ids)]

    def batch_retrieve(self, queries: list[str], k: int) -> list[list[RetrievalResult]]:
        return [self.retrieve(q, k) for q in queries]


RANKINGS = {
    "bees": ["d0", "d3", "d1", "d8", "d2", "d5", "dskip", "d4"],
    "mites": ["d2", "d7", "d0", "d6"],
    "hives": ["d1", "d0", "d4", "d3"],
}


def unlabelled(*queries: str) -> EvaluationDataset:
    return EvaluationDataset.from_records([{"query_id": f"q-{q}", "query": q} for q in queries])


def grades_qrels(rankings: dict[str, list[str]]) -> tuple[dict[str, dict[str, float]], dict[str, dict[str, float]]]:
    """The qrels the grades make (computed here, not by the evaluator) and the run, as TREC dicts."""
    qrels: dict[str, dict[str, float]] = {}
    run: dict[str, dict[str, float]] = {}
    for query, ids in rankings.items():
        qid = f"q-{query}"
        qrels[qid] = {}
        for d in ids:
            if "SKIP" not in DOCS[d] and d not in qrels[qid]:
                qrels[qid][d] = float(min(3, len(DOCS[d].split()) // 10))
        run[qid] = {}
        for r, d in enumerate(ids):
            run[qid].setdefault(d, float(len(ids) - r))
    return qrels, run


def test_a_query_without_labels_is_read() -> None:
    query = unlabelled("bees").queries[0]
    assert query.is_unlabelled and not query.is_id_labelled and query.relevance == {}


def test_a_judge_that_needs_answers_is_refused_before_retrieval() -> None:
    retriever = Retriever(RANKINGS)
    data = EvaluationDataset.from_records([{"query": "bees", "expected_answers": ["x"]}, {"query": "mites"},
                                           {"query": "hives"}], source="qs.jsonl")
    evaluator = Evaluator(retriever, ["ndcg@10"], judge="contains")
    with pytest.raises(EvretError, match=r"^dataset qs: 2 queries have neither expected answers nor relevant ids; "
                                         r"judge 'contains' needs expected answers: give --judge relevance"):
        evaluator.evaluate(data)
    with pytest.raises(EvretError, match=r"^data/qs.jsonl: 2 queries"):
        evaluator.check_labels(data, source="data/qs.jsonl")
    with pytest.raises(EvretError, match="neither expected answers"):
        evaluator.dry_run(data)
    assert retriever.calls == 0
    with pytest.raises(EvretError, match="1 query has neither"):  # the default judge too
        Evaluator(retriever, ["ndcg@10"]).evaluate(unlabelled("bees"))
    assert retriever.calls == 0


def test_graded_queries_score_exactly_as_the_qrels_their_grades_make() -> None:
    judge = LengthGrade()
    results = Evaluator(Retriever(RANKINGS), ["ndcg@10", "precision@5", "recall@10", "ap"], judge=judge,
                        k=10).evaluate(unlabelled(*RANKINGS))
    qrels, run = grades_qrels(RANKINGS)
    expected = evaluate_run(qrels, run, ["ndcg@10", "precision@5", "recall@10", "ap"], per_query=True,
                            relevance_level=2)
    for qid, values in expected.items():
        assert results.per_query[qid].scores == values  # the same arithmetic: exact
        assert results.per_query[qid].relevant_ids == qrels[qid]  # zeros included: judged non-relevant
    # the judge saw the query and the text, never an expected answer; a text retrieved twice was judged once
    assert {c.query for c in judge.seen} == set(RANKINGS) and {c.expected_text for c in judge.seen} == {""}
    assert len(judge.seen) == sum(map(len, RANKINGS.values()))
    judged = results.stats["judged"]
    assert judged == {"judge": "length-grade", "grades": 3, "queries": 3, "pairs": 16, "unmeasured": 1,
                      "histogram": {"0": 3, "1": 4, "2": 2, "3": 6}, "expected_answers_unused": 0,
                      "relevance_level": 2.0}
    assert results.config["relevance_level"] == 2.0
    assert results.per_query["q-bees"].unmeasured == 1 and results.stats["unmeasured"]["counted_as"] == "unjudged"
    assert [j.unmeasured for j in results.per_query["q-bees"].judgments][6] == [0]
    with pytest.raises(UnmeasuredJudgmentsError, match="1 judgment"):
        Evaluator(Retriever(RANKINGS), ["ndcg@10"], judge=LengthGrade(), fail_on_unmeasured=True).evaluate(
            unlabelled(*RANKINGS))


def test_a_document_retrieved_twice_is_graded_once_and_counts_once() -> None:
    judge = LengthGrade()
    results = Evaluator(Retriever({"mites": ["d2", "d2", "d7"]}), ["ndcg@10"], judge=judge).evaluate(
        unlabelled("mites"))
    query = results.per_query["q-mites"]
    assert len(judge.seen) == 2 and query.relevant_ids == {"d2": 1.0, "d7": 3.0}
    assert query.gains == [1.0, 0.0, 3.0]  # the repeat is not relevant again


def test_relevance_level_sets_the_binary_measures() -> None:
    data = unlabelled(*RANKINGS)
    qrels, run = grades_qrels(RANKINGS)
    for level, judge_level in ((None, 2.0), (1.0, 1.0), (3.0, 3.0)):
        results = Evaluator(Retriever(RANKINGS), ["precision@5", "ndcg@10"], judge=LengthGrade(),
                            relevance_level=level).evaluate(data)
        expected = evaluate_run(qrels, run, ["precision@5", "ndcg@10"], relevance_level=judge_level)
        assert results.scores == pytest.approx(expected, abs=1e-15)
        assert results.stats["judged"]["relevance_level"] == judge_level
    # a level changes precision, never ndcg (gains are the grades)
    p1 = Evaluator(Retriever(RANKINGS), ["precision@5"], judge=LengthGrade(), relevance_level=1).evaluate(data)
    p3 = Evaluator(Retriever(RANKINGS), ["precision@5"], judge=LengthGrade(), relevance_level=3).evaluate(data)
    assert p1.scores["precision@5"] > p3.scores["precision@5"]


def test_a_mixed_dataset_scores_id_labelled_queries_on_their_ids() -> None:
    data = EvaluationDataset.from_records([
        {"query_id": "q-bees", "query": "bees", "relevant_doc_ids": {"d0": 3, "d1": 1}},
        {"query_id": "q-mites", "query": "mites"},
        {"query_id": "q-hives", "query": "hives", "expected_answers": ["ignored answer"]},
    ])
    judge = LengthGrade()
    results = Evaluator(Retriever(RANKINGS), ["ndcg@10", "precision@5"], judge=judge).evaluate(data)
    qrels, run = grades_qrels(RANKINGS)
    qrels["q-bees"] = {"d0": 3.0, "d1": 1.0}
    expected = evaluate_run(qrels, run, ["ndcg@10", "precision@5"], per_query=True, relevance_level=2)
    assert {qid: results.per_query[qid].scores for qid in expected} == expected
    assert {c.query for c in judge.seen} == {"mites", "hives"}  # the id-labelled query is not judged
    assert results.stats["judged"]["expected_answers_unused"] == 1
    assert results.per_query["q-bees"].labelled_by == "ids"


def test_any_match_is_refused_with_a_reference_free_judge() -> None:
    retriever = Retriever(RANKINGS)
    with pytest.raises(EvretError, match="any_match"):
        Evaluator(retriever, ["recall@5"], judge=LengthGrade(), matching="any_match").evaluate(unlabelled("bees"))
    assert retriever.calls == 0


def test_dry_run_plans_query_passage_pairs() -> None:
    plan = Evaluator(Retriever(RANKINGS), ["ndcg@10"], judge=LengthGrade()).dry_run(unlabelled(*RANKINGS))
    assert plan["unique"] == 16 and plan["to_send"] == 0


def test_a_graded_results_file_works_with_report_and_compare(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    from evret_core.cli import main

    data = unlabelled(*RANKINGS)
    for name, level in (("a", None), ("b", 1.0)):
        results = Evaluator(Retriever(RANKINGS), ["ndcg@10", "precision@5"], judge=LengthGrade(),
                            relevance_level=level).evaluate(data)
        results.to_json(tmp_path / f"{name}.json")
    back = load_results(tmp_path / "a.json")
    assert back.config["relevance_level"] == 2.0 and back.stats["judged"]["pairs"] == 16
    # the curves read back use the level the run used: precision@5 on the curve == the table's
    curves = back.metric_curves()
    assert curves["precision"][4] == pytest.approx(back.scores["precision@5"], abs=1e-12)
    for form, suffix in (("html", "html"), ("markdown", "md")):
        assert main(["report", str(tmp_path / "a.json"), "--format", form, "--output",
                     str(tmp_path / f"a.{suffix}")]) == 0
    markdown = (tmp_path / "a.md").read_text(encoding="utf-8")
    assert f"{back.scores['ndcg@10']:.3f}" in markdown
    assert main(["compare", str(tmp_path / "a.json"), str(tmp_path / "b.json")]) == 0
    out = capsys.readouterr().out
    assert "precision@5" in out and "ndcg@10" in out


class Answers(LLMProvider):
    """An in-process provider: YES for a passage of 30 words or more; counts its calls."""

    name = "answers"

    def __init__(self) -> None:
        super().__init__("m")
        self.calls = 0

    async def acomplete(self, messages: Sequence[ChatMessage], **keywords: Any) -> LLMResponse:
        self.calls += 1
        await asyncio.sleep(0)
        words = sum(w == "word" for w in messages[-1].content.split())
        return LLMResponse("YES" if words >= 30 else "NO", 1, 1)


class QueryOnlyLLM(LLMJudge):
    """The llm judge, asked with no expected answer (a yes/no reference-free judge: grades 0-1)."""

    reference_free = True


def test_a_rerun_is_graded_from_the_judgment_cache(tmp_path: Path) -> None:
    data = unlabelled(*RANKINGS)
    first, second = Answers(), Answers()
    runs = []
    for provider in (first, second):
        judge = QueryOnlyLLM(provider=provider, cache=str(tmp_path / "cache"))
        runs.append(Evaluator(Retriever(RANKINGS), ["ndcg@10", "precision@5"], judge=judge).evaluate(data))
    assert first.calls == 16 and second.calls == 0
    assert runs[0].scores == runs[1].scores
    assert runs[1].stats["judged"]["grades"] is None and runs[1].stats["judged"]["relevance_level"] is None
    assert set(runs[1].stats["judged"]["histogram"]) == {"0", "1"}


def test_config_and_cli_flag(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                             capsys: pytest.CaptureFixture[str]) -> None:
    register_plugin(Plugin(), name="graded")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "qs.jsonl").write_text("".join(json.dumps({"query_id": f"q-{q}", "query": q}) + "\n"
                                               for q in RANKINGS), encoding="utf-8")
    from evret_core.cli import main

    base = ["evaluate", "--dataset", "qs.jsonl", "--retriever", "given", "--metric", "precision@5", "-k", "10"]
    assert main([*base, "--judge", "length-grade", "--relevance-level", "nan"]) == 2
    assert "--relevance-level: must be a number" in capsys.readouterr().err
    assert main([*base, "--no-progress"]) == 2
    assert capsys.readouterr().err.strip().endswith(
        "qs.jsonl: 3 queries have neither expected answers nor relevant ids; judge 'contains' needs expected "
        "answers: give --judge relevance (grades each passage against the query alone, 0-3), or label them")
    assert main([*base, "--judge", "length-grade", "--relevance-level", "3", "--output", "out.json"]) == 0
    out = capsys.readouterr().out
    assert ("judged by 'length-grade' without expected answers: 16 (query, passage) grades 0-3 (0: 3, 1: 4, 2: 2, "
            "3: 6; 1 unmeasured); binary metrics count grade >= 3 as relevant") in out
    saved = json.loads((tmp_path / "out.json").read_text())
    assert saved["config"]["relevance_level"] == 3.0 and saved["stats"]["judged"]["relevance_level"] == 3.0
    qrels, run = grades_qrels(RANKINGS)
    assert saved["scores"]["precision@5"] == evaluate_run(qrels, run, ["precision@5"], relevance_level=3)[
        "precision@5"]
    config = EvaluateConfig(dataset="qs.jsonl", retriever="given", metrics=["precision@5"], judge="length-grade")
    assert config.evaluate().config["relevance_level"] == 2.0  # the judge's cut
    with pytest.raises(ValueError, match="relevance_level"):  # pydantic's error, named by the config readers
        EvaluateConfig(dataset="qs.jsonl", retriever="given", metrics=["precision@5"], relevance_level="high")


class Plugin:
    """Registers the test judge and retriever, as an installed plugin would."""

    @hookimpl
    def register_judges(self, register: Any) -> None:
        register("length-grade", LengthGrade)

    @hookimpl
    def register_retrievers(self, register: Any) -> None:
        register("given", lambda: Retriever(RANKINGS))


def test_evret_evaluate_with_the_relevance_judge_end_to_end(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """The `relevance` judge against a stub chat server grades every (query, passage) of a query-only dataset;
    the scores are the trec path's on the qrels its grades make, and a rerun is graded from the cache."""
    import re

    from evret_core.cli import main
    from evret_core.testing.llm_provider import stub_options
    from evret_core.testing.llm_stubs import StubLLMServer, StubRequest, isolate_llm_env

    def by_length(request: StubRequest) -> str:  # the same grades as LengthGrade (SKIP: grade 0 here)
        passage = re.search(r"<passage-([0-9a-f]+)>\n(.*?)\n</passage-\1>", request.prompt, re.S)
        assert passage and "expected" not in request.prompt.lower()
        words = passage.group(2).split()
        return json.dumps({"grade": 0 if "SKIP" in words else min(3, len(words) // 10)})

    isolate_llm_env(monkeypatch, tmp_path, "EVRET_STUB_API_KEY")
    register_plugin(Plugin(), name="graded-e2e")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "qs.jsonl").write_text("".join(json.dumps({"query_id": f"q-{q}", "query": q}) + "\n"
                                               for q in RANKINGS), encoding="utf-8")
    with StubLLMServer(by_length) as server:
        options = [f"--judge-option={k}={v}" for k, v in stub_options(server).items()]
        args = ["evaluate", "--dataset", "qs.jsonl", "--retriever", "given", "--judge", "relevance", *options,
                "--metric", "ndcg@10", "--metric", "precision@5", "-k", "10", "--no-progress"]
        assert main([*args, "--output", "first.json"]) == 0
        sent = len(server.requests)
        assert sent == sum(len(set(ids)) for ids in RANKINGS.values())  # one call per distinct (query, passage)
        assert "judged by 'relevance' without expected answers" in capsys.readouterr().out
        assert main([*args, "--output", "second.json"]) == 0
        assert len(server.requests) == sent  # graded from the cache
    first = json.loads((tmp_path / "first.json").read_text())
    second = json.loads((tmp_path / "second.json").read_text())
    assert first["scores"] == second["scores"]
    qrels, run = grades_qrels(RANKINGS)
    for qid, docs in qrels.items():  # the stub grades SKIP 0 where LengthGrade left it unmeasured
        docs.update({d: 0.0 for d in run[qid] if "SKIP" in DOCS[d]})
    expected = evaluate_run(qrels, run, ["ndcg@10", "precision@5"], relevance_level=2)
    assert first["scores"]["ndcg@10"] == pytest.approx(expected["ndcg@10"], abs=1e-12)
    assert first["scores"]["precision@5"] == pytest.approx(expected["precision@5"], abs=1e-12)
