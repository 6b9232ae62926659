"""One evaluation run over the labelled turns of a conversation set and its query forms."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from evret_core.contracts.conversation import Rewriter, RewriteRequest
from evret_core.contracts.errors import EvretError
from evret_core.conversation.forms import HistoryWindow, form_texts
from evret_core.conversation.turn_evaluator import ConversationEvaluator
from evret_core.evaluation.evaluator import Evaluator
from evret_core.evaluation.executors import LocalExecutor
from evret_core.io.conversations import Conversation, ConversationSet, ConversationTurn
from evret_core.io.datasets import EvaluationDataset
from evret_core.statistics.clustered import cluster_paired_p_value
from evret_core.statistics.inference import compare_scores

CORPUS = {
    "lib": {"text": "court law library self help guides appeal forms staff"},
    "costs": {"text": "losing party pays the costs of an appeal"},
    "fees": {"text": "filing fees for an appeal can be waived"},
    "deadline": {"text": "deadline to file an appeal is thirty days"},
    "judge": {"text": "the judge decides the appeal after hearing"},
    "tax": {"text": "tax refund status check online"},
    "refund": {"text": "refund delays happen when returns have errors"},
    "audit": {"text": "an audit letter asks for receipts"},
}


class WordRetriever:
    """Ranks the corpus by the words a document shares with the query; counts the texts it was asked."""

    name = "words"

    def __init__(self) -> None:
        self.asked: list[str] = []

    def __call__(self, query: str, k: int) -> list[dict[str, Any]]:
        self.asked.append(query)
        words = set(query.lower().replace("?", " ").split())
        scored = [(len(words & set(doc["text"].split())), doc_id) for doc_id, doc in CORPUS.items()]
        ranked = sorted((s for s in scored if s[0] > 0), key=lambda s: (-s[0], s[1]))[:k]
        return [{"doc_id": doc_id, "score": float(score), "text": CORPUS[doc_id]["text"]} for score, doc_id in ranked]


def turn(conversation: str, index: int, user: str, ids: Sequence[str] | None = None, rewrite: str | None = None,
         **tags: str) -> ConversationTurn:
    return ConversationTurn(turn_id=f"{conversation}:{index}", index=index, user=user, rewrite=rewrite,
                            relevant_doc_ids=None if ids is None else tuple(ids), tags=tags)


def conversations() -> ConversationSet:
    law = Conversation("law", (
        turn("law", 1, "can I use the court library for my appeal", ["lib"], domain="govt", depth="1"),
        turn("law", 2, "who pays if I win", ["costs"], rewrite="who pays the costs of an appeal if I win",
             domain="govt", depth="2"),
        turn("law", 3, "and the fees", ["fees"], rewrite="and the fees", domain="govt", depth="10"),
    ))
    tax = Conversation("tax", (
        turn("tax", 1, "where is my tax refund", ["tax"], rewrite="tax refund status", domain="fiqa", depth="1"),
        turn("tax", 2, "why so slow", ["refund"], rewrite="why are refund delays so slow", domain="fiqa", depth="2"),
        turn("tax", 3, "thanks", None),
    ))
    appeal = Conversation("appeal", (
        turn("appeal", 1, "how long do I have to appeal", ["deadline"], rewrite="deadline to file an appeal",
             domain="govt", depth="1"),
        turn("appeal", 2, "who decides it", ["judge"], rewrite="who decides the appeal", domain="govt", depth="10"),
    ))
    return ConversationSet((law, tax, appeal), corpus=CORPUS, name="three")


def run(retriever: WordRetriever | None = None, **options: Any) -> Any:
    evaluator = Evaluator(retriever or WordRetriever(), metrics=["ndcg@3", "recall@3"], k=3)
    options.setdefault("n_resamples", 300)
    options.setdefault("test_resamples", 999)
    return ConversationEvaluator(evaluator, **options).evaluate(conversations())


def test_per_turn_values_equal_single_question_evaluation() -> None:
    results = run(forms=["last_turn", "full_history", "rewrite"])
    data = conversations()
    texts = form_texts(data.conversations, ["last_turn", "full_history", "rewrite"], HistoryWindow())
    for form in ("last_turn", "full_history", "rewrite"):
        queries = [t.query(t.turn_id, texts[form][t.turn_id] or "") for _, t in data.labelled_turns()
                   if texts[form][t.turn_id] is not None]
        plain = Evaluator(WordRetriever(), metrics=["ndcg@3", "recall@3"], k=3).evaluate(
            EvaluationDataset(queries=queries, corpus=CORPUS)).per_query_scores()
        for metric in ("ndcg@3", "recall@3"):
            values = results.turn_values(form, metric)
            turn_ids = list(results.per_turn)
            for i, turn_id in enumerate(turn_ids):
                if turn_id in plain:
                    assert values[i] == plain[turn_id][metric]
                else:
                    assert math.isnan(values[i])
            assert results.scores[form][metric] == pytest.approx(
                np.mean([plain[q][metric] for q in plain]), abs=1e-12)
    assert results.n["rewrite"] == {"turns": 6, "conversations": 3}
    assert results.n["last_turn"] == {"turns": 7, "conversations": 3}
    assert results.unmeasured == {"history_only_turns": 1, "forms": {"rewrite": ["law:1"]}, "judgments": 0}


def test_identical_texts_of_a_turn_are_retrieved_once() -> None:
    retriever = WordRetriever()
    results = run(retriever, forms=["last_turn", "rewrite"])
    # law:3's rewrite is its message: one query for both forms
    assert results.per_turn["law:3"].forms["rewrite"].query_id == "law:3#1"
    assert results.per_turn["law:3"].forms["last_turn"].query_id == "law:3#1"
    assert retriever.asked.count("and the fees") == 1
    assert len(retriever.asked) == results.stats["queries"] == 7 + 5
    assert results.stats["texts"] == 13


def test_missing_forms_are_out_of_the_pairs() -> None:
    results = run(forms=["last_turn", "rewrite"])
    (ndcg, recall) = results.differences
    assert ndcg["n_turns"] == 6 and ndcg["n_conversations"] == 3
    a, b = results.turn_values("last_turn", "ndcg@3"), results.turn_values("rewrite", "ndcg@3")
    both = ~np.isnan(b)
    assert ndcg["mean"] == pytest.approx(float((b[both] - a[both]).mean()), abs=1e-12)
    clusters = np.array([0, 0, 0, 1, 1, 2, 2])
    assert ndcg["p_value"] == cluster_paired_p_value(a[both], b[both], clusters[both], "randomization", 999, 0)


def test_unit_turn_p_values_are_compare_scores() -> None:
    results = run(forms=["last_turn", "full_history", "rewrite"], unit="turn", test="t")
    view = results.score_view().per_query
    measured = [t for t, row in view.items() if "rewrite/ndcg@3" in row]
    runs = {form: {t: {m: view[t][f"{form}/{m}"] for m in ("ndcg@3", "recall@3")} for t in measured}
            for form in ("last_turn", "rewrite")}
    expected = compare_scores(runs, ["ndcg@3", "recall@3"], test="t", n_resamples=999)
    got = {(d["metric"], d["b"]): d["p_value"] for d in results.differences}
    for pair in expected.pairs:
        assert got[(pair.metric, "rewrite")] == pair.p_value


def test_slices_and_turn_indexes_sort_numerically() -> None:
    results = run(forms=["last_turn", "rewrite"])
    assert list(results.slices["depth"]) == ["1", "2", "10"]
    assert list(results.slices["domain"]) == ["fiqa", "govt"]
    assert results.slices["domain"]["govt"]["last_turn"]["conversations"] == 2
    assert list(results.by_turn_index["last_turn"]) == ["1", "2", "3"]
    assert results.by_turn_index["rewrite"]["1"]["difference"]["ndcg@3"]["n"] == 2


class CountingExecutor(LocalExecutor):
    """The local executor, counting the stages it ran."""

    def __init__(self) -> None:
        self.stages: list[str] = []

    def rewrite(self, rewriter: Any, requests: Sequence[RewriteRequest], batch_size: int, progress: Any) -> Any:
        self.stages.append("rewrite")
        return super().rewrite(rewriter, requests, batch_size, progress)

    def retrieve(self, retriever: Any, batches: Any, k: int, progress: Any) -> list[list[Any]]:
        self.stages.append("retrieve")
        return super().retrieve(retriever, batches, k, progress)


class LastWordsRewriter(Rewriter):
    """Adds the previous user message to the current one; gives up on messages under four words."""

    name = "last-words"
    deterministic = True

    def rewrite(self, request: RewriteRequest) -> str | None:
        if len(request.message.split()) < 4:
            return None
        before = [t.text for t in request.history if t.role == "user"][-1:]
        return " ".join([*before, request.message])


def test_the_rewriter_runs_through_the_evaluators_executor() -> None:
    executor = CountingExecutor()
    stages: list[tuple[str, int, int]] = []
    evaluator = Evaluator(WordRetriever(), metrics=["recall@3"], k=3, executor=executor)
    results = ConversationEvaluator(evaluator, forms=["last_turn", "rewriter"], rewriter=LastWordsRewriter(),
                                    n_resamples=100, test_resamples=99,
                                    progress=lambda s, d, t: stages.append((s, d, t))).evaluate(conversations())
    assert executor.stages == ["rewrite", "retrieve"]
    assert ("rewrite", 7, 7) in stages
    assert results.per_turn["law:2"].forms["rewriter"].query == "can I use the court library for my appeal who pays if I win"
    assert results.unmeasured["forms"] == {"rewriter": ["law:3", "tax:2", "appeal:2"]}
    assert results.n["rewriter"] == {"turns": 4, "conversations": 3}
    assert results.config["rewriter"] == {"name": "last-words"}
    plan = ConversationEvaluator(evaluator, forms=["last_turn", "rewriter"], rewriter=LastWordsRewriter()).dry_run(
        conversations())
    assert plan["queries"] == 7 and plan["rewriter"] == {"requests": 7}


def test_bad_settings_are_refused_before_any_work() -> None:
    retriever = WordRetriever()
    evaluator = Evaluator(retriever, metrics=["recall@3"], k=3)
    with pytest.raises(EvretError, match="needs a rewriter"):
        ConversationEvaluator(evaluator, forms=["last_turn", "rewriter"])
    with pytest.raises(EvretError, match="baseline form 'rewrite' is not one of"):
        ConversationEvaluator(evaluator, forms=["last_turn"], baseline_form="rewrite")
    with pytest.raises(EvretError, match="unknown query form 'history'"):
        ConversationEvaluator(evaluator, forms=["history"])
    with pytest.raises(EvretError, match="unit must be"):
        ConversationEvaluator(evaluator, unit="query")
    empty = ConversationSet((Conversation("c", (turn("c", 1, "hello"),)),), corpus=CORPUS, name="empty.jsonl")
    with pytest.raises(EvretError, match="empty.jsonl: no conversation has a labelled turn"):
        ConversationEvaluator(evaluator).evaluate(empty)
    assert retriever.asked == []


def test_text_labelled_turns_are_judged_in_the_one_run() -> None:
    """A turn labelled with answer texts goes through the evaluator's judge (contains) with the other forms' queries:
    one judging pass, the distinct (answer, passage) contexts of every form judged once."""
    answers = ConversationTurn(turn_id="d:2", index=2, user="how long", rewrite="how long to file an appeal deadline",
                               expected_answers=("thirty days",), answer_aliases=(("thirty days",),))
    data = ConversationSet((Conversation("d", (turn("d", 1, "I lost my appeal", ["judge"]), answers)),),
                           corpus=CORPUS, name="texts")
    evaluator = Evaluator(WordRetriever(), metrics=["recall@3"], k=3, judge="contains")
    results = ConversationEvaluator(evaluator, forms=["last_turn", "rewrite"], n_resamples=50,
                                    test_resamples=99).evaluate(data)
    assert results.turn_values("rewrite", "recall@3").tolist()[1] == 1.0
    assert results.queries["d:2#2"].labelled_by == "text"
    judgments = results.stats["evaluation"]["judgments"]
    assert judgments["unique"] <= judgments["contexts"] and judgments["unmeasured"] == 0
