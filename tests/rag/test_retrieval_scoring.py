"""Retrieval scored once, by one Evaluator on the retrieved run; ``answer-relevance`` and ``correct`` built-in RAG
scores whose names no plugin can take; each question's scores in the pinned order (issue 34, T22)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from evret_core import EvretError, hookimpl
from evret_core.contracts.errors import PluginError
from evret_core.contracts.retrieve import RetrievalResult
from evret_core.evaluation.evaluator import Evaluator
from evret_core.plugins.loading import get_registry, register_plugin
from evret_core.plugins.registry import create_rag_score, rag_score_names
from evret_core.rag import QuestionSet, RagEvaluator, RagScore, ScoreInput
from evret_core.rag.harness import score_names
from evret_core.rag.questions.conditions import resolve_conditions
from evret_core.rag.scores.kind import BUILTIN_SCORES, AnswerRelevance, Correct, run_scores

CORPUS = {"d1": {"text": "Bees make wax in the hive."}, "d2": {"text": "Wasps make paper nests."},
          "d3": {"text": "Ants farm aphids."}}
QUESTIONS = QuestionSet.from_records([
    {"id": "q1", "question": "What do bees make?", "answers": ["wax"], "gold_doc_ids": ["d1"]},
    {"id": "q2", "question": "What do wasps make?", "answers": ["paper"]},  # by answer text: the retrieval judge
    # expected to refuse: no labels for retrieval (retrieved, not scored)
    {"id": "q3", "question": "What do ants farm?", "expected_behaviour": "refuse"},
], corpus=CORPUS)


def word_retriever(query: str, k: int) -> list[RetrievalResult]:
    """The passages sharing a word with the query, most shared words first."""
    words = set(query.lower().rstrip("?").split())
    shared = {d: len(words & set(doc["text"].lower().rstrip(".").split())) for d, doc in CORPUS.items()}
    ranked = sorted((d for d in shared if shared[d]), key=lambda d: (-shared[d], d))[:k]
    return [RetrievalResult(doc_id=d, score=float(shared[d]), metadata={"text": CORPUS[d]["text"]}) for d in ranked]


def test_retrieval_is_scored_by_one_evaluator_given_the_retrieved_run(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[Any] = []
    construct = Evaluator.__init__

    def spy(self: Evaluator, retriever: Any, *args: Any, **kwargs: Any) -> None:
        made.append(retriever)
        construct(self, retriever, *args, **kwargs)

    stages: list[str] = []
    evaluator = RagEvaluator(word_retriever, "extractive", conditions=["gold", "retrieved"], k=2, n_resamples=20,
                             progress=lambda stage, done, total: stages.append(stage))
    monkeypatch.setattr(Evaluator, "__init__", spy)
    results = evaluator.evaluate(QUESTIONS)
    assert len(made) == 1
    run = made[0]
    # the run as retrieved, for the labelled questions only
    assert isinstance(run, dict) and list(run) == ["q1", "q2"]
    assert [[r.doc_id for r in results_] for results_ in run.values()] == [["d1", "d2"], ["d2", "d1"]]
    assert stages[0] == "retrieve" and stages.count("retrieve") >= 2  # the stage keeps its name, reported once
    assert "judge" in stages  # q2 is judged on its answer text
    assert results.per_question["q3"].retrieved_ids == ["d3"] and results.per_question["q3"].retrieval is None
    assert results.per_question["q1"].retrieval["recall@1"] == 1.0  # type: ignore[index]
    assert results.per_question["q2"].retrieval["recall@1"] == 1.0  # type: ignore[index]
    # a precomputed run is looked up, not retrieved, and scored by the same one Evaluator
    made.clear()
    stages.clear()
    precomputed = {"q1": [{"doc_id": "d1", "text": CORPUS["d1"]["text"]}],
                   "q2": [{"doc_id": "d2", "text": CORPUS["d2"]["text"]}], "q3": []}
    again = RagEvaluator(precomputed, "extractive", k=2, n_resamples=20,
                         progress=lambda stage, done, total: stages.append(stage)).evaluate(QUESTIONS)
    assert len(made) == 1 and list(made[0]) == ["q1", "q2"] and "retrieve" not in stages
    assert again.retrieval == results.retrieval
    with pytest.raises(EvretError, match=r"the precomputed run lacks 1 of the dataset's 3 queries \('q3'\)"):
        RagEvaluator({"q1": [], "q2": []}, "extractive", k=2).evaluate(QUESTIONS)


def test_answer_relevance_and_correct_are_built_in_rag_scores() -> None:
    assert BUILTIN_SCORES == ("claims", "answer-match", "behaviour", "answer-relevance", "correct")
    assert {"answer-relevance", "correct"} <= set(rag_score_names())
    registry = get_registry()
    assert registry.owner("rag_score", "correct") == registry.owner("rag_score", "claims") is not None
    assert registry.owner("rag_score", "answer-relevance") == registry.owner("rag_score", "claims")
    assert isinstance(create_rag_score("correct"), Correct)
    assert isinstance(create_rag_score("answer-relevance"), AnswerRelevance)
    # the options decide what they give, and so what a run's gates know
    assert create_rag_score("correct").metrics == ("correct",)
    assert create_rag_score("correct", answer_judge="exact-judge").metrics == ("answer_judge", "correct")
    assert create_rag_score("answer-relevance", enabled=False).metrics == ()
    with pytest.raises(EvretError, match=r"correct_f1 must be a number in \[0, 1\], got 2"):
        create_rag_score("correct", correct_f1=2)
    gold = resolve_conditions(["gold"])
    plain = score_names(gold, 5, relevance=False)
    assert "gold/correct" in plain and "gold/answer_judge" not in plain and "gold/answer_relevance" not in plain
    both = score_names(gold, 5, answer_judge="a judge")
    assert {"gold/answer_judge", "gold/answer_relevance"} <= set(both)


def test_a_plugin_registering_correct_is_refused_naming_it() -> None:
    class Mine(RagScore):
        name = "correct"
        metrics = ("correct",)

        def score(self, item: ScoreInput) -> Mapping[str, float | None]:
            return {"correct": 1.0}

    class Plugin:
        @hookimpl
        def register_rag_scores(self, register):  # type: ignore[no-untyped-def]
            register("correct", Mine)

    with pytest.raises(PluginError, match=r"rag_score 'correct' is registered by both 'evret-core:rag_scores' and "
                                          r"'mine'"):
        register_plugin(Plugin(), name="mine")
    with pytest.raises(PluginError, match=r"rag score 'correct' is registered by 'evret-core:rag_scores' and 'mine'"):
        create_rag_score("correct")  # never the plugin's in its place


PINNED = ["groundedness", "faithfulness", "contradiction_rate", "citation_precision", "citation_recall", "exact",
          "f1", "refused", "behaviour_ok", "answer_relevance", "answer_judge", "correct", "n_contexts"]


def test_a_questions_scores_come_in_the_pinned_order() -> None:
    class ContextCount(RagScore):
        name = "context-count"
        metrics = ("n_contexts",)

        def score(self, item: ScoreInput) -> Mapping[str, float | None]:
            return {"n_contexts": float(len(item.contexts))}

    class Plugin:
        @hookimpl
        def register_rag_scores(self, register):  # type: ignore[no-untyped-def]
            register("context-count", ContextCount)

    register_plugin(Plugin(), name="p")
    # the claims score declares history_support_rate too, which only an answer judged against a conversation has
    declared = [*PINNED[:5], "history_support_rate", *PINNED[5:]]
    assert [m for s in run_scores(answer_judge="a judge") for m in s.metrics] == declared
    results = RagEvaluator(None, "extractive", conditions=["gold"], answer_judge="exact",
                           n_resamples=10).evaluate(QUESTIONS)
    assert list(results.per_question["q1"].conditions["gold"].scores) == PINNED
    assert results.per_question["q1"].conditions["gold"].correct is True
    # the answer judge's verdict only for an answer to a question with golds; correct for a behaviour too
    refusal = results.per_question["q3"].conditions["gold"]
    assert "answer_judge" not in refusal.scores and refusal.scores["correct"] == float(bool(refusal.correct))
    off = RagEvaluator(None, "extractive", conditions=["gold"], relevance="none", n_resamples=10).evaluate(QUESTIONS)
    assert list(off.per_question["q1"].conditions["gold"].scores) == [
        m for m in PINNED if m not in ("answer_relevance", "answer_judge")]
