"""The executor contract, as tests: an executor plugin's test class subclasses :class:`ExecutorConformance`.

An executor changes where the expensive stages run, never what they compute (:mod:`evret_core.contracts.executor`):
each stage here is run on the executor under test and on :class:`~evret_core.evaluation.executors.LocalExecutor`, and
the answers must be equal, in order, with progress reported up to the full count. The parts handed to the stages are built by
name where the core builds them by name (a judge, the RAG harness's parts), or are instances of the small classes
of this module, importable on any worker, for executors that pickle objects to other processes.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from evret_core.contracts import kinds
from evret_core.contracts.errors import EvretError
from evret_core.contracts.executor import Executor, JudgeRun
from evret_core.contracts.judge import JudgmentContext
from evret_core.contracts.metric import RankedBatch
from evret_core.contracts.retrieve import RetrievalResult
from evret_core.evaluation.executors import LocalExecutor
from evret_core.io.datasets import EvaluationDataset
from evret_core.io.queries import QueryExample
from evret_core.testing.suite import Conformance

DOCS = {f"d{i}": f"passage {i} is about {('bees', 'wax', 'honey', 'queens')[i % 4]} and number {i}"
        for i in range(24)}


class WordRetriever:
    """A deterministic retriever over :data:`DOCS`: documents sharing more words with the query rank first (ties by
    id); a plain object, so an executor may pickle it to its workers."""

    def retrieve(self, query: str, k: int) -> list[RetrievalResult]:
        words = set(query.lower().split())
        scored = sorted(((len(words & set(text.split())), doc_id) for doc_id, text in DOCS.items()),
                        key=lambda pair: (-pair[0], pair[1]))
        return [RetrievalResult(doc_id=doc_id, score=float(score), metadata={"text": DOCS[doc_id]})
                for score, doc_id in scored[:k]]

    def batch_retrieve(self, queries: list[str], k: int) -> list[list[RetrievalResult]]:
        return [self.retrieve(q, k) for q in queries]


QUERIES = [f"which passage is about {topic} number {i}" for i, topic in
           enumerate(("bees", "wax", "honey", "queens", "bees", "wax", "honey"))]


def _contexts() -> list[JudgmentContext]:
    out = []
    for i, doc_id in enumerate(sorted(DOCS)):
        expected = ("honey", "queens", "number 3", "nothing like it")[i % 4]
        out.append(JudgmentContext(query=f"q{i}", expected_text=expected, retrieved_text=DOCS[doc_id]))
    return out


def _batches() -> list[RankedBatch]:
    rng = np.random.default_rng(7)
    batches = []
    for n in (5, 1, 9):
        rankings = [[f"d{j}" for j in rng.permutation(24)[: int(rng.integers(0, 12))]] for _ in range(n)]
        qrels = [{f"d{j}": int(rng.integers(0, 3)) for j in rng.choice(24, size=4, replace=False)} for _ in range(n)]
        batches.append(RankedBatch.from_rankings(rankings, qrels))
    return batches


class _Progress:
    """Records the counts a stage reports."""

    def __init__(self) -> None:
        self.seen: list[int] = []

    def __call__(self, done: int) -> None:
        self.seen.append(done)


class ExecutorConformance(Conformance):
    """Tests every executor must pass. Override the ``executor`` fixture (class-scoped, as a classmethod, when
    starting one is expensive: a cluster, worker processes). The name it is registered under is looked up by its
    class; override the ``registered_name`` fixture when the lookup cannot find it."""

    kind = kinds.EXECUTOR

    @pytest.fixture
    def subject(self, executor: Any) -> Any:
        return executor

    @pytest.fixture
    def executor(self) -> Any:
        raise NotImplementedError("override the `executor` fixture to return the executor under test")

    def test_is_an_executor_with_a_json_config_naming_it(self, executor: Any) -> None:
        assert isinstance(executor, Executor)
        assert isinstance(executor.name, str) and executor.name
        config = executor.config()
        assert config["name"] == executor.name
        json.dumps(config)

    def test_registered_by_name_and_unknown_options_named(self, registered_name: str | None) -> None:
        if registered_name is None:
            pytest.skip("not registered: the executor is not built by name")
        from evret_core.evaluation.executors import resolve_executor

        built = resolve_executor(registered_name)
        assert isinstance(built, Executor) and built.name == registered_name
        with pytest.raises(EvretError, match="no_such_option"):
            resolve_executor(registered_name, {"no_such_option": 1})

    def test_retrieve_gives_the_local_results_in_order(self, executor: Any) -> None:
        batches = [QUERIES[:3], QUERIES[3:4], QUERIES[4:]]
        progress = _Progress()
        got = executor.retrieve(WordRetriever(), batches, 4, progress)
        want = LocalExecutor().retrieve(WordRetriever(), batches, 4, lambda done: None)
        assert len(got) == len(batches)
        assert [[[(r.doc_id, r.score) for r in rs] for rs in batch] for batch in got] == \
            [[[(r.doc_id, r.score) for r in rs] for rs in batch] for batch in want]
        assert progress.seen and progress.seen[-1] == len(QUERIES)
        assert progress.seen == sorted(progress.seen)

    def test_judge_gives_the_local_verdicts_in_order(self, executor: Any) -> None:
        from evret_core.plugins.registry import create_judge

        contexts = _contexts()
        progress = _Progress()
        got = executor.judge(create_judge("contains"), contexts, 5, progress)
        want = LocalExecutor().judge(create_judge("contains"), contexts, 5, lambda done: None)
        assert isinstance(got, JudgeRun)
        assert got.verdicts == want.verdicts and True in got.verdicts and False in got.verdicts
        assert progress.seen and progress.seen[-1] == len(contexts)
        assert progress.seen == sorted(progress.seen)
        reordered = executor.judge(create_judge("contains"), contexts[::-1], 7, lambda done: None)
        assert reordered.verdicts == want.verdicts[::-1]

    def test_metrics_give_the_local_values_exactly(self, executor: Any) -> None:
        from evret_core.plugins.registry import create_metric

        metrics = [create_metric(name) for name in ("ndcg@5", "recall@3", "ap", "mrr")]
        got = executor.metrics(metrics, _batches())
        want = LocalExecutor().metrics(metrics, _batches())
        assert list(got) == [m.name for m in metrics]
        for name, values in want.items():
            assert len(values) == 15
            np.testing.assert_array_equal(np.asarray(got[name], dtype=np.float64), values)

    def test_empty_stages(self, executor: Any) -> None:
        from evret_core.plugins.registry import create_judge, create_metric

        assert executor.retrieve(WordRetriever(), [], 3, lambda done: None) == []
        assert executor.judge(create_judge("contains"), [], 4, lambda done: None).verdicts == []
        assert len(executor.metrics([create_metric("ndcg@3")], [])["ndcg@3"]) == 0

    def test_evaluator_gives_the_local_results(self, executor: Any) -> None:
        from evret_core.evaluation.evaluator import Evaluator

        dataset = EvaluationDataset(queries=[
            *(QueryExample(query_id=f"t{i}", query_text=q, expected_answers=[q.split()[-3]])
              for i, q in enumerate(QUERIES)),
            *(QueryExample(query_id=f"i{i}", query_text=q, relevant_doc_ids=[f"d{i}", f"d{(i * 5 + 1) % 24}"])
              for i, q in enumerate(QUERIES)),
        ])
        metrics = ["ndcg@5", "recall@5", "mrr"]
        on_it = Evaluator(WordRetriever(), metrics=metrics, judge="contains", executor=executor).evaluate(dataset)
        local = Evaluator(WordRetriever(), metrics=metrics, judge="contains").evaluate(dataset)
        assert {q: r.scores for q, r in on_it.per_query.items()} == {q: r.scores for q, r in local.per_query.items()}
        assert on_it.config["executor"]["name"] == executor.name
        assert 0 < local.scores["recall@5"] < 1, "the case must find some answers, not all"

    def test_rag_generation_gives_the_local_results(self, executor: Any) -> None:
        from evret_core.rag import QuestionSet, RagEvaluator, RagQuestion

        corpus = {doc_id: {"text": text} for doc_id, text in DOCS.items()}
        questions = QuestionSet(name="conformance", corpus=corpus, questions=[
            RagQuestion(question_id=f"q{i}", question=f"Which passage is about number {i}?", answers=[[f"number {i}"]],
                        gold_doc_ids=[f"d{i}"]) for i in range(6)])
        on_it = RagEvaluator(conditions=["gold"], executor=executor, n_resamples=50).evaluate(questions)
        local = RagEvaluator(conditions=["gold"], n_resamples=50).evaluate(questions)
        assert on_it.generation == local.generation
        assert any(v for v in local.generation["gold"].values()), "the case must answer something"
        assert {q: o.model_dump(exclude={"config"}) for q, o in on_it.per_question.items()} == \
            {q: o.model_dump(exclude={"config"}) for q, o in local.per_question.items()}
