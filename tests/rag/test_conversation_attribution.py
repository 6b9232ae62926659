"""Generated history over conversations (RagEvaluator(history="generated"), evret rag --history generated): the
turns are answered in waves, one executor call each, each turn seeing its own condition's earlier answers (the
dataset's reply when one is missing, counted); and the carried_failure attribution: a wrong answer at turn 2 that
the generator carries into turn 3 makes turn 3 carried_failure with carried_from turn 2, and only with generated
history."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from evret_core.contracts.conversation import Turn
from evret_core.contracts.errors import EvretError
from evret_core.contracts.executor import Executor, GenerateRun
from evret_core.contracts.generation import Answer, GenerationRequest, Generator
from evret_core.contracts.retrieve import RetrievalResult, Retriever
from evret_core.conversation.forms import HistoryWindow
from evret_core.io.conversations import ConversationSet
from evret_core.rag import RagEvaluator, RagResults
from evret_core.rag.turns import TurnQuestions, turn_questions

CORPUS = {
    "d1": {"title": "", "text": "The capital of France is Paris."},
    "d2": {"title": "", "text": "Paris has two million inhabitants."},
    "d3": {"title": "", "text": "The Eiffel tower is 330 metres tall."},
}
ANSWERS = {"capital?": "Paris", "population?": "two million", "tower height?": "330 metres"}
CONVERSATIONS = [
    {"conversation_id": "c1", "turns": [
        {"user": "capital?", "agent": "Paris.", "expected_answers": ["Paris"], "relevant_doc_ids": ["d1"]},
        {"user": "population?", "agent": "Two million.", "expected_answers": ["two million"],
         "relevant_doc_ids": ["d2"]},
        {"user": "tower height?", "agent": "330 metres.", "expected_answers": ["330 metres"],
         "relevant_doc_ids": ["d3"]},
    ]},
    {"conversation_id": "c2", "turns": [
        {"user": "hello", "agent": "Hi, ask away."},
        {"user": "capital?", "agent": "It is Paris.", "expected_answers": ["Paris"], "relevant_doc_ids": ["d1"]},
    ]},
]


@pytest.fixture
def turns(tmp_path: Path) -> TurnQuestions:
    path = tmp_path / "conversations.jsonl"
    path.write_text("".join(json.dumps(c) + "\n" for c in CONVERSATIONS), encoding="utf-8")
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"_id": k, **v}) + "\n" for k, v in CORPUS.items()), encoding="utf-8")
    return turn_questions(ConversationSet.from_jsonl(path, corpus))


class Everything(Retriever):
    def retrieve(self, query: str, k: int) -> list[RetrievalResult]:
        return [RetrievalResult(doc_id=d, score=1.0, metadata={"text": CORPUS[d]["text"]}) for d in CORPUS][:k]


class Scripted(Generator):
    """Answers right, except: ``population?`` under retrieved when ``inject`` (a wrong answer), any turn whose
    history holds a wrong agent reply (the failure carried), and ``missing`` questions under gold (no answer)."""

    name = "scripted"

    def __init__(self, inject: bool = False, missing: tuple[str, ...] = ()) -> None:
        self.inject, self.missing = inject, missing
        self.requests: list[GenerationRequest] = []

    def generate(self, request: GenerationRequest) -> Answer | None:
        self.requests.append(request)
        if request.condition == "gold" and request.question_id in self.missing:
            return None
        if self.inject and request.question == "population?" and request.condition == "retrieved":
            return Answer(text="WRONG")
        if any(t.role == "agent" and t.text.startswith("WRONG") for t in request.history):
            return Answer(text="WRONG again")
        return Answer(text=f"{ANSWERS[request.question]} ({request.condition})")


class Counting(Executor):
    """The local executor, counting its generate calls and the slots of each."""

    def __init__(self) -> None:
        self.calls: list[list[Any]] = []

    def generate(self, runner: Any, requests: dict[Any, Any], progress: Any) -> GenerateRun:
        self.calls.append(list(requests))
        return super().generate(runner, requests, progress)


def evaluate(turns: TurnQuestions, generator: Scripted, history: str = "generated",
             executor: Executor | None = None) -> RagResults:
    return RagEvaluator(Everything(), generator, k=3, n_resamples=20, history=history, executor=executor,
                        relevance="none").evaluate(turns)


def test_waves_answer_each_turn_after_its_conversation_s_earlier_turns(turns: TurnQuestions) -> None:
    executor, generator = Counting(), Scripted()
    evaluate(turns, generator, executor=executor)
    # wave 0: the first generation turn of c1 and of c2 under both conditions; wave 1: c1's second; wave 2: its third
    assert [sorted({i for _, i in call}) for call in executor.calls] == [[0, 3], [1], [2]]
    assert [len(call) for call in executor.calls] == [4, 2, 2]


def test_a_turn_sees_its_own_condition_s_earlier_answers(turns: TurnQuestions) -> None:
    generator = Scripted()
    evaluate(turns, generator)
    by_slot = {(r.question_id, r.condition): r for r in generator.requests}
    for condition in ("gold", "retrieved"):
        history = by_slot[("c1:3", condition)].history
        assert history == (Turn("user", "capital?"), Turn("agent", f"Paris ({condition})"),
                           Turn("user", "population?"), Turn("agent", f"two million ({condition})"))
    # a turn that is history only keeps the dataset's reply
    assert by_slot[("c2:2", "gold")].history == (Turn("user", "hello"), Turn("agent", "Hi, ask away."))


def test_a_missing_earlier_answer_falls_back_to_the_reference_reply_and_is_counted(turns: TurnQuestions) -> None:
    generator = Scripted(missing=("c1:1",))
    results = evaluate(turns, generator)
    by_slot = {(r.question_id, r.condition): r for r in generator.requests}
    assert by_slot[("c1:2", "gold")].history[1] == Turn("agent", "Paris.")
    assert by_slot[("c1:2", "retrieved")].history[1] == Turn("agent", "Paris (retrieved)")
    assert results.stats["history_fallbacks"] == 2  # c1:2 and c1:3 under gold
    assert results.config["conversation"]["history"] == "generated"


def test_a_failure_carried_from_turn_2_into_turn_3_is_carried_failure(turns: TurnQuestions, tmp_path: Path) -> None:
    executor = Counting()
    results = evaluate(turns, Scripted(inject=True), executor=executor)
    labels = {qid: q.attribution for qid, q in results.per_question.items()}
    assert labels == {"c1:1": "both_right", "c1:2": "context_noise", "c1:3": "carried_failure",
                      "c2:2": "both_right"}
    assert results.per_question["c1:3"].carried_from == "c1:2"
    assert results.per_question["c1:2"].carried_from is None
    assert results.attribution["carried_failure"] == 1 and results.attribution["context_noise"] == 1
    assert results.attribution_by_turn_index["3"]["carried_failure"] == 1
    # the extra answer: one more executor call, c1:3 under retrieved with the dataset's history
    assert executor.calls[-1] == [("retrieved", 2)]
    assert results.stats["reference_history_answers"] == 1 and results.stats["generator_calls"] == 9
    path = tmp_path / "results.json"
    results.to_json(path)
    assert RagResults.from_json(path).per_question["c1:3"].carried_from == "c1:2"
    data = json.loads(path.read_text())
    data["per_question"]["c1:3"]["carried_from"] = "c9:9"
    path.write_text(json.dumps(data))
    with pytest.raises(EvretError, match="carried_from 'c9:9' is not a question of the run"):
        RagResults.from_json(path)


def test_the_report_lists_the_carried_pair(turns: TurnQuestions) -> None:
    import io

    from evret_core.report.rag_compare import rag_html
    from evret_core.report.rag_document import rag_sections
    from evret_core.report.rag_tables import print_rag

    results = evaluate(turns, Scripted(inject=True))
    out = io.StringIO()
    print_rag(results, file=out)
    assert "carried failures (earlier wrong turn -> the turn it carried into; 1)\n  c1:2 -> c1:3\n" in out.getvalue()
    assert "  carried_failure            1" in out.getvalue()
    carried = next(s for s in rag_sections({"run": results}) if s.title == "Carried failures")
    assert carried.rows == [["c1:2", "c1:3"]]
    # the HTML page shows the same pair and the same counts per turn index as the terminal and the Markdown
    page = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", rag_html({"run": results})))
    assert "carried failures (1)" in page and " c1:2 c1:3 " in page
    by_turn = next(s for s in rag_sections({"run": results}) if s.title == "Failure attribution by turn index")
    assert " ".join(["by turn index Turns of each index in their conversation.", *by_turn.header,
                     *[v for row in by_turn.rows for v in row]]) in page


def test_with_reference_history_nothing_is_carried(turns: TurnQuestions) -> None:
    results = evaluate(turns, Scripted(inject=True), history="reference")
    assert results.per_question["c1:3"].attribution == "both_right"
    assert "carried_failure" not in results.attribution
    assert "history_fallbacks" not in results.stats


def test_generated_history_with_a_query_built_from_replies_is_refused() -> None:
    with pytest.raises(EvretError, match="--history generated with --query-form full_history --history-roles all"):
        RagEvaluator(Everything(), Scripted(), history="generated", query_form="full_history",
                     history_window=HistoryWindow(roles="all"))
    with pytest.raises(EvretError, match="unknown history 'generate' \\(did you mean generated\\?\\)"):
        RagEvaluator(Everything(), Scripted(), history="generate")


class WrongFirst(Scripted):
    """Wrong under retrieved at ``capital?`` (the first turn of c1 and of c2), and wherever it is carried; it plans
    its calls as an LLM generator does (one a request)."""

    def generate(self, request: GenerationRequest) -> Answer | None:
        if request.question == "capital?" and request.condition == "retrieved":
            self.requests.append(request)
            return Answer(text="WRONG")
        return super().generate(request)

    def plan(self, requests: list[GenerationRequest]) -> dict[str, int]:
        return {"calls": len(requests), "estimated_input_tokens": 10 * len(requests), "estimated_output_tokens": 0}


def wrong_first(history: str) -> RagEvaluator:
    return RagEvaluator(Everything(), WrongFirst(), k=3, n_resamples=20, history=history, relevance="none")


def test_the_dry_run_bounds_the_reanswers_of_generated_history(turns: TurnQuestions) -> None:
    import io

    from evret_core.report.rag_tables import print_plan

    plan = wrong_first("generated").dry_run(turns)
    # c1:2 and c1:3 follow an earlier turn of c1 under retrieved; c2:2 is its conversation's first question
    assert (plan["generator_calls"], plan["reanswers_at_most"], plan["generator_calls_at_most"]) == (8, 2, 10)
    assert plan["llm_total"]["calls"] == 8 and plan["llm_total"]["calls_at_most_with_reanswers"] == 10
    out = io.StringIO()
    print_plan(plan, file=out)
    assert "--history generated: at most 2 more generator call(s) (10 in all)" in out.getvalue()
    assert "calls_at_most_with_reanswers: 10" in out.getvalue()
    # the bound is reached: c1:1 wrong under retrieved carries into c1:2 and c1:3, both answered again
    results = wrong_first("generated").evaluate(turns)
    assert results.stats["reference_history_answers"] == 2 and results.stats["generator_calls"] == 10
    assert results.attribution["carried_failure"] == 2
    reference = wrong_first("reference").dry_run(turns)
    assert "reanswers_at_most" not in reference and "calls_at_most_with_reanswers" not in reference["llm_total"]


class Pickling(Executor):
    """The local executor whose outcomes come back pickled, as a Ray worker's do."""

    def generate(self, runner: Any, requests: dict[Any, Any], progress: Any) -> GenerateRun:
        import pickle

        run = super().generate(runner, requests, progress)
        return GenerateRun(pickle.loads(pickle.dumps(run.outcomes)), run.stats)  # noqa: S301 - our own bytes


def test_scores_see_the_history_the_claims_were_judged_against(turns: TurnQuestions) -> None:
    import dataclasses
    from collections.abc import Iterable, Mapping

    from evret_core.contracts.claims import ClaimTask, ClaimVerdict
    from evret_core.contracts.rag_score import RagScore, ScoreInput
    from evret_core.rag.claims.claim_judges import LexicalClaimJudge
    from evret_core.rag.pipeline import Outcome

    judged: list[tuple[str, str, tuple[Turn, ...]]] = []  # (question, answer, history)
    scored: list[tuple[str, str, tuple[Turn, ...]]] = []

    class Recording(LexicalClaimJudge):
        def judge_claims(self, tasks: Iterable[ClaimTask]) -> list[list[ClaimVerdict]]:
            tasks = list(tasks)
            judged.extend((t.question, t.answer_text, t.history) for t in tasks)
            return list(super().judge_claims(tasks))

    class Seen(RagScore):
        name, metrics = "seen", ("history_messages",)

        def score(self, item: ScoreInput) -> Mapping[str, float | None]:
            scored.append((item.question.question, item.answer.text, item.history))
            return {"history_messages": float(len(item.history))}

    for executor in (None, Pickling()):
        judged.clear()
        scored.clear()
        evaluator = RagEvaluator(Everything(), Scripted(inject=True), claim_judge=Recording("token-overlap"), k=3,
                                 n_resamples=20, history="generated", claims_history="user", executor=executor,
                                 relevance="none")
        evaluator.scores.append(Seen())
        results = evaluator.evaluate(turns)
        # every answer scored, the carried re-answer (c1:3 with the reference history) included
        assert results.stats["reference_history_answers"] == 1 and len(scored) == 9
        assert Counter(scored) == Counter(judged)
        assert ("tower height?", "WRONG again", (Turn("user", "capital?"), Turn("user", "population?"))) in scored
        assert ("capital?", "Paris (gold)", (Turn("user", "hello"),)) in scored  # c2:2, after a history-only turn
    # the outcome keeps no claim task: the scores rebuild its history from the request as sent
    assert [f.name for f in dataclasses.fields(Outcome)] == ["answer", "verdicts", "relevance"]
