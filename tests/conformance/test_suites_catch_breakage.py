"""The conformance suites fail on implementations that break the contract they state: each broken object below is
run through one test of its kind's suite, which must raise; every one of the fourteen suites is shown to, and the name
check every suite inherits."""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
import pytest

from evret_core.contracts import kinds
from evret_core.contracts.claims import ClaimTask, ClaimVerdict
from evret_core.contracts.conversation import Rewriter, RewriteRequest
from evret_core.contracts.executor import JudgeRun
from evret_core.contracts.generation import Answer, Claim, Context, GenerationRequest
from evret_core.contracts.hooks import hookimpl
from evret_core.contracts.judge import Judge, JudgmentContext
from evret_core.contracts.metric import Metric, RankedBatch
from evret_core.contracts.perturb import ConditionCase
from evret_core.contracts.provider import LLMCallError, LLMProvider
from evret_core.contracts.rag_score import RagScore, ScoreInput
from evret_core.contracts.rerank import Reranker
from evret_core.contracts.retrieve import RankedColumns, RetrievalResult, Retriever
from evret_core.evaluation.executors import LocalExecutor
from evret_core.io.datasets import EvaluationDataset
from evret_core.plugins.loading import register_plugin
from evret_core.plugins.registry import (
    create_claim_judge,
    create_evaluator,
    create_generator,
    create_judge,
    create_metric,
    create_retrieval_evaluator,
)
from evret_core.testing import (
    ClaimJudgeConformance,
    ExecutorConformance,
    GeneratorConformance,
    InProcessProviderConformance,
    JudgeConformance,
    MetricConformance,
    OutputEvaluatorConformance,
    PerturbationConformance,
    ProviderConformance,
    RagScoreConformance,
    RerankerConformance,
    RetrievalEvaluatorConformance,
    RetrieverConformance,
    RewriterConformance,
)
from evret_core.testing.claim_judge_suite import task as claim_task
from evret_core.testing.generator_suite import CAFE, MUSEUM, PARKING, request
from evret_core.testing.llm_provider import WireProvider
from evret_core.testing.llm_stubs import StubLLMServer
from evret_core.testing.metric_suite import random_case
from evret_core.testing.perturbation_suite import CORPUS, QUESTIONS
from evret_core.testing.rag_score_suite import MUSEUM as RAG_MUSEUM
from evret_core.testing.rag_score_suite import OPENS
from evret_core.testing.reranker_suite import CANDIDATES, first_stage
from evret_core.testing.retrieval_evaluator_suite import DATASET
from evret_core.testing.rewriter_suite import REQUESTS as REWRITE_REQUESTS
from evret_core.testing.suite import registered_name_of

REQUESTS = [request("q1", "When does the museum open?", CAFE, MUSEUM),
            request("q2", "How much does parking cost per hour?", PARKING, MUSEUM)]


class ShuffledJudging(LocalExecutor):
    """Judges every context, but gives the verdicts back in the wrong order."""

    name = "shuffled"

    def judge(self, judge: Any, contexts: Any, batch_size: int, progress: Any) -> JudgeRun:
        run = super().judge(judge, contexts, batch_size, progress)
        return JudgeRun(run.verdicts[1:] + run.verdicts[:1], run.stats)


def test_executor_suite_catches_verdicts_out_of_order() -> None:
    with pytest.raises(AssertionError):
        ExecutorConformance().test_judge_gives_the_local_verdicts_in_order(ShuffledJudging())


class CitesEverything:
    """Answers from the contexts, citing an id it was not shown."""

    name = "cites-everything"

    def batch_generate(self, requests: Sequence[GenerationRequest]) -> list[Answer | None]:
        return [Answer(text=r.contexts[-1].text, claims=[Claim(text=r.contexts[-1].text, citations=["elsewhere"])])
                for r in requests]

    def config(self) -> dict[str, Any]:
        return {"name": self.name}


class AnswersByPosition:
    """Answers a batch's first request differently from the others (a batch that is not one-by-one)."""

    name = "by-position"

    def __init__(self) -> None:
        self.inner = create_generator("extractive")

    def batch_generate(self, requests: Sequence[GenerationRequest]) -> list[Answer | None]:
        answers = self.inner.batch_generate(requests)
        return [None if i == 0 else a for i, a in enumerate(answers)]


def test_generator_suite_catches_unknown_citations_and_position_dependent_batches() -> None:
    suite = GeneratorConformance()
    with pytest.raises(AssertionError, match="elsewhere"):
        suite.test_answers_are_consistent_and_cite_only_given_contexts(CitesEverything(), REQUESTS, [])
    with pytest.raises(AssertionError):
        suite.test_batch_agrees_with_one_by_one_and_keeps_order(AnswersByPosition(), REQUESTS, [])


class MeanOfBatch:
    """The ``exact`` evaluator, but every record gets the batch's mean: a record's score depends on the others."""

    name = "mean-of-batch"

    def evaluate(self, records: list[dict[str, Any]]) -> Any:
        results = create_evaluator("exact").evaluate(records)
        return dataclasses.replace(results, scores=[results.mean for _ in records])

    def config(self) -> dict[str, Any]:
        return {"name": self.name}


class DriftsInBatches:
    """The ``exact`` evaluator, but a record scored among others comes out ``drift`` under its score alone, as a
    float32 model's batched encode does (1.0 alone, 0.99999997 in a batch)."""

    name = "drifts-in-batches"

    def __init__(self, drift: float) -> None:
        self.drift = drift

    def evaluate(self, records: list[dict[str, Any]]) -> Any:
        results = create_evaluator("exact").evaluate(records)
        if len(records) > 1:
            results = dataclasses.replace(
                results, scores=[None if s is None else s * (1.0 - self.drift) for s in results.scores])
        return results

    def config(self) -> dict[str, Any]:
        return {"name": self.name}


def test_output_evaluator_suite_catches_batch_dependent_scores() -> None:
    records = [{"output": "Paris", "target": "Paris"}, {"output": "Six", "target": "Eight"}]
    suite = OutputEvaluatorConformance()
    with pytest.raises(AssertionError):
        suite.test_together_one_at_a_time_and_reversed_agree(MeanOfBatch(), records)
    with pytest.raises(AssertionError):  # a real difference, not rounding
        suite.test_together_one_at_a_time_and_reversed_agree(DriftsInBatches(1e-3), records)
    # float rounding of a batched encode is within the suite's stated tolerance
    suite.test_together_one_at_a_time_and_reversed_agree(DriftsInBatches(3e-8), records)


class DropsFirstContextInPlace:
    """Removes the first base context from the caller's list (mutates its input)."""

    name = "drops-in-place"

    def __call__(self, question: Any, contexts: list[Context], questions: Any, rng: np.random.Generator) -> Any:
        if contexts:
            contexts.pop(0)
        return ConditionCase(list(contexts), info={"family": "missing-gold"})


class MutatingFamily(PerturbationConformance):
    family = "missing-gold"

    def make(self) -> Any:
        return DropsFirstContextInPlace()


def test_perturbation_suite_catches_a_family_that_changes_its_input() -> None:
    from evret_core.rag.questions.question_sets import QuestionSet

    with pytest.raises(AssertionError, match="base contexts were changed"):
        MutatingFamily().test_inputs_are_left_as_they_were(QuestionSet(corpus=CORPUS, questions=QUESTIONS))


def contexts(matching: bool) -> list[JudgmentContext]:
    """The judge suite's default examples: identical texts (``matching``) or texts on unrelated topics."""
    pairs = [("What is the capital of France?", "Paris is the capital of France",
              "Photosynthesis converts light into chemical energy in plants"),
             ("How many legs does a spider have?", "Spiders have eight legs",
              "The stock market closed higher on Tuesday")]
    return [JudgmentContext(query=q, expected_text=e, retrieved_text=e if matching else other)
            for q, e, other in pairs]


class ExpectedTextOnly(Judge):
    """Contains the expected text, and never looks at its aliases."""

    name = "expected-only"

    def judge(self, context: JudgmentContext) -> bool:
        return context.expected_text.lower() in context.retrieved_text.lower()


def test_judge_suite_catches_a_judge_ignoring_aliases() -> None:
    suite = JudgeConformance()
    suite.test_matching_contexts_match(ExpectedTextOnly(), contexts(True))  # right on the expected text alone
    with pytest.raises(AssertionError):
        suite.test_an_alias_matches_like_the_expected_text(ExpectedTextOnly(), contexts(True), contexts(False))


class GradedOffCut(ExpectedTextOnly):
    """Grades 0-3, but its grades at its cut (2) contradict its verdicts."""

    name = "graded-off-cut"
    grades = 3
    cut = 2

    def batch_grade(self, contexts: Sequence[JudgmentContext]) -> list[float | None]:
        return [1.0 if self.judge(c) else 2.0 for c in contexts]  # inverted: grades disagree with the verdicts


class ReadsTheAnswer(ExpectedTextOnly):
    """Says it is reference-free, yet compares with the expected answer."""

    name = "reads-the-answer"
    reference_free = True


def test_judge_suite_catches_grades_that_disagree_with_the_verdicts_and_a_judge_reading_the_answer() -> None:
    suite = JudgeConformance()
    with pytest.raises(AssertionError):
        suite.test_grades_agree_with_the_verdicts(GradedOffCut(), contexts(True), contexts(False))
    with pytest.raises(AssertionError):
        suite.test_a_reference_free_judge_never_reads_the_expected_answer(ReadsTheAnswer(), contexts(True),
                                                                           contexts(False))


class WordRetriever(Retriever):
    """Documents sharing words with the query, best first."""

    name = "words"
    docs: ClassVar[dict[str, str]] = {"a": "retrieval augmented generation", "b": "vector databases work",
                                      "c": "how retrieval works", "d": "what is generation"}

    def retrieve(self, query: str, k: int) -> list[RetrievalResult]:
        words = set(query.split())
        ranked = sorted(self.docs, key=lambda d: (-len(words & set(self.docs[d].split())), d))
        return [RetrievalResult(doc_id=d, score=float(len(self.docs) - i), metadata={"text": self.docs[d]})
                for i, d in enumerate(ranked[:k])]


class OneTooMany(WordRetriever):
    def retrieve(self, query: str, k: int) -> list[RetrievalResult]:
        return super().retrieve(query, k + 1)


class Unsorted(WordRetriever):
    def retrieve(self, query: str, k: int) -> list[RetrievalResult]:
        return super().retrieve(query, k)[::-1]


def test_retriever_suite_catches_k_plus_one_results_and_unsorted_ones() -> None:
    suite, queries = RetrieverConformance(), ["what is retrieval augmented generation", "how do vector databases work"]
    suite.test_at_most_k(WordRetriever(), queries)
    suite.test_retrieve_returns_ranked_results(WordRetriever(), queries)
    with pytest.raises(AssertionError):
        suite.test_at_most_k(OneTooMany(), queries)
    with pytest.raises(AssertionError, match="sorted by score"):
        suite.test_retrieve_returns_ranked_results(Unsorted(), queries)


class BatchMean(Metric):
    """ndcg@3, but every query of a batch gets the batch's mean: a query's value depends on the others."""

    family = "batch-mean"

    def __init__(self, k: int | None = 3) -> None:
        super().__init__(k=k)
        self.inner = create_metric("ndcg@3")

    def compute(self, batch: RankedBatch) -> Any:
        values = self.inner.compute(batch)
        return np.full_like(values, values.mean()) if len(values) else values


class BatchMeanSuite(MetricConformance):
    family = "ndcg"

    def make(self, name: str) -> Metric:
        return BatchMean()


def test_metric_suite_catches_a_value_that_depends_on_the_batch() -> None:
    rankings, qrels = random_case(seed=11)
    with pytest.raises(AssertionError):
        BatchMeanSuite().test_vectorised_agrees_with_each_query_alone((rankings, qrels,
                                                                       RankedBatch.from_rankings(rankings, qrels)))


class RetriesItself(WireProvider):
    """The test kit's provider, retrying a failed call inside ``acomplete`` (Evret's client retries)."""

    name = "retries-itself"

    async def acomplete(self, messages: Any, **options: Any) -> Any:
        try:
            return await super().acomplete(messages, **options)
        except LLMCallError:
            return await super().acomplete(messages, **options)


class DropsTheSchema(WireProvider):
    """The test kit's provider, saying it takes ``json_schema=`` (``constrains_json``) but never sending it."""

    name = "drops-the-schema"
    constrains_json = True

    async def acomplete(self, messages: Any, *, json_schema: Any = None, **options: Any) -> Any:
        return await super().acomplete(messages, **options)


class RandomAtZero(LLMProvider):
    """A model in process that answers at random, even at temperature 0."""

    name = "random-at-zero"

    async def acomplete(self, messages: Any, *, temperature: float = 0.0, max_tokens: int | None = None) -> Any:
        from evret_core.contracts.provider import LLMResponse

        return LLMResponse(text=f"colour {random.random()}", input_tokens=5, output_tokens=2, model=self.model)


class ProviderPlugin:
    @hookimpl
    def register_llm_providers(self, register: Any) -> None:
        register("retries-itself", RetriesItself)
        register("random-at-zero", RandomAtZero)
        register("drops-the-schema", DropsTheSchema)


class RetryingSuite(ProviderConformance):
    provider = "retries-itself"
    key_env = ("EVRET_STUB_API_KEY",)

    def base_url(self, server: StubLLMServer) -> str:
        return server.openai_base_url


class SchemaDroppingSuite(RetryingSuite):
    provider = "drops-the-schema"


class RandomSuite(InProcessProviderConformance):
    def options(self) -> dict[str, Any]:
        return {"provider": "random-at-zero", "model": "tiny"}


def test_provider_suites_catch_retries_inside_acomplete_and_randomness_at_temperature_zero() -> None:
    register_plugin(ProviderPlugin(), name="broken-providers")
    with pytest.raises(AssertionError):
        RetryingSuite().test_one_attempt_per_call_and_retry_after_honoured()
    with pytest.raises(AssertionError, match="json_schema"):  # constrains_json, yet no schema on the wire
        SchemaDroppingSuite().test_structured_answers_through_llm_score()
    with pytest.raises(AssertionError):
        RandomSuite().test_temperature_zero_is_deterministic()


class DropsTheLastQuery:
    """The ``retrieval`` evaluator, run on every query of the dataset but the last."""

    name = "drops-last"

    def __init__(self, **options: Any) -> None:
        self.inner = create_retrieval_evaluator("retrieval", **options)

    def evaluate(self, dataset: EvaluationDataset) -> Any:
        return self.inner.evaluate(EvaluationDataset(queries=dataset.queries[:-1]))


class RetrievalEvaluatorPlugin:
    @hookimpl
    def register_retrieval_evaluators(self, register: Any) -> None:
        register("drops-last", DropsTheLastQuery)


class DropsTheLastQuerySuite(RetrievalEvaluatorConformance):
    name = "drops-last"


def test_retrieval_evaluator_suite_catches_a_dropped_query() -> None:
    register_plugin(RetrievalEvaluatorPlugin(), name="broken-retrieval-evaluators")
    suite = DropsTheLastQuerySuite()
    with pytest.raises(AssertionError):
        suite.test_a_result_for_every_query(suite.make().evaluate(DATASET))


class OneVerdictShort:
    """The ``lexical`` claim judge, leaving out the verdict of each task's last claim."""

    name = "one-short"

    def __init__(self) -> None:
        self.inner = create_claim_judge("lexical")

    def judge_claims(self, tasks: Sequence[ClaimTask]) -> list[list[ClaimVerdict]]:
        return [row[:-1] for row in self.inner.judge_claims(tasks)]

    def config(self) -> dict[str, Any]:
        return {"name": self.name}


def test_claim_judge_suite_catches_a_verdict_missing() -> None:
    tasks = [claim_task("How much is parking?", [("Parking costs 3 euros per hour", ["parking"]),
                                                 ("Parking is free for bicycles", [])], CAFE, PARKING)]
    ClaimJudgeConformance().test_one_verdict_per_claim_in_order(create_claim_judge("lexical"), tasks)
    with pytest.raises(AssertionError):
        ClaimJudgeConformance().test_one_verdict_per_claim_in_order(OneVerdictShort(), tasks)


class CitesTheHistory:
    """The ``lexical`` claim judge, adding each supporting message's ``history:...`` id to the claim's citations."""

    name = "cites-history"

    def __init__(self) -> None:
        self.inner = create_claim_judge("lexical")

    def judge_claims(self, tasks: Sequence[ClaimTask]) -> list[list[ClaimVerdict]]:
        return [[dataclasses.replace(v, citations=[*v.citations, *(s for s in v.supporting if s.startswith("history:"))])
                 for v in row] for row in self.inner.judge_claims(tasks)]

    def config(self) -> dict[str, Any]:
        return {"name": self.name}


def test_claim_judge_suite_catches_a_history_id_made_a_citation() -> None:
    ClaimJudgeConformance().test_history_is_evidence_never_a_citation(create_claim_judge("lexical"))
    with pytest.raises(AssertionError):
        ClaimJudgeConformance().test_history_is_evidence_never_a_citation(CitesTheHistory())


class UndeclaredScore(RagScore):
    """Declares ``length`` and returns ``words`` too."""

    name = "undeclared"
    metrics = ("length",)

    def score(self, item: ScoreInput) -> dict[str, float | None]:
        text = "" if item.answer is None else item.answer.text
        return {"length": float(len(text)), "words": float(len(text.split()))}


class UndeclaredScoreSuite(RagScoreConformance):
    name = "undeclared"

    def make(self) -> Any:
        return UndeclaredScore()


def test_rag_score_suite_catches_an_undeclared_name() -> None:
    claim = Claim(text="The museum opens at 9 am", citations=["museum"])
    items = [ScoreInput(OPENS, "gold", (RAG_MUSEUM,), Answer(text="The museum opens at 9 am.", claims=[claim]), (),
                        "answer")]
    with pytest.raises(AssertionError, match="undeclared scores {'words'}"):
        UndeclaredScoreSuite().test_returns_declared_numbers_or_none_the_same_again(items)


class QueryWords(Reranker):
    """Scores a candidate by the query's words in its text."""

    name = "query-words"

    def score(self, query: str, candidates: RankedColumns) -> list[float]:
        words = set(query.lower().split())
        texts = () if candidates.texts is None else candidates.texts
        return [float(len(words & set(str(t).lower().split()))) for t in texts]


class LosesTheLast(QueryWords):
    """Drops each query's last candidate, even when k leaves room for it."""

    def batch_rerank_columns(self, queries: Any, candidates: Any, k: int) -> list[RankedColumns]:
        return [ranked.head(max(len(ranked) - 1, 0)) for ranked in super().batch_rerank_columns(queries, candidates, k)]


class KeepsTheFirstStageOrder(QueryWords):
    """Gives its own scores but leaves the candidates in the first stage's order."""

    def batch_rerank_columns(self, queries: Any, candidates: Any, k: int) -> list[RankedColumns]:
        scores = self.batch_score(queries, candidates)
        return [RankedColumns(list(c.ids[:k]), list(s)[:k], None if c.texts is None else list(c.texts[:k]))
                for c, s in zip(candidates, scores, strict=True)]


class Jittery(QueryWords):
    """Adds noise to each score: the same candidates, reranked twice, come back in different orders."""

    def score(self, query: str, candidates: RankedColumns) -> list[float]:
        return [s + random.random() * 5 for s in super().score(query, candidates)]


def test_reranker_suite_catches_a_lost_candidate_the_first_stage_order_and_noise() -> None:
    suite = RerankerConformance()
    candidates = {query: first_stage(pairs) for query, pairs in CANDIDATES.items()}
    suite.test_keeps_exactly_the_candidates(QueryWords(), candidates)
    suite.test_ordered_by_its_own_score(QueryWords(), candidates)
    suite.test_deterministic(QueryWords(), candidates)
    with pytest.raises(AssertionError, match="every candidate once"):
        suite.test_keeps_exactly_the_candidates(LosesTheLast(), candidates)
    with pytest.raises(AssertionError, match="sorted by the reranker's score"):
        suite.test_ordered_by_its_own_score(KeepsTheFirstStageOrder(), candidates)
    random.seed(7)
    with pytest.raises(AssertionError):
        suite.test_deterministic(Jittery(), candidates)


class Numbered(Rewriter):
    """Numbers each message by its place in the batch: a request's text depends on its neighbours."""

    deterministic = True

    def batch_rewrite(self, requests: Sequence[RewriteRequest]) -> list[str | None]:
        return [f"{i} {r.message}" for i, r in enumerate(requests)]


class SilentOnFirstTurns(Rewriter):
    """Gives no query for a message without history."""

    def rewrite(self, request: RewriteRequest) -> str | None:
        return request.message if request.history else None


def test_rewriter_suite_catches_a_batch_dependent_text_and_a_first_turn_without_a_query() -> None:
    suite = RewriterConformance()
    with pytest.raises(AssertionError, match="must give each request the text rewrite gives it alone"):
        suite.test_one_text_or_none_per_request_in_order(Numbered(), REWRITE_REQUESTS)
    with pytest.raises(AssertionError, match="a message with no history still has a query"):
        suite.test_a_first_turn_gets_a_query(SilentOnFirstTurns(), REWRITE_REQUESTS)


class NamedOtherwise(ExpectedTextOnly):
    name = "starts-with"


def test_every_suite_catches_an_object_named_otherwise_than_registered() -> None:
    class Plugin:
        @hookimpl
        def register_judges(self, register: Any) -> None:
            register("expected-only", NamedOtherwise)

    register_plugin(Plugin(), name="misnamed-judges")
    suite, judge = JudgeConformance(), create_judge("expected-only")
    with pytest.raises(AssertionError, match="registered as 'expected-only' but its name is 'starts-with'"):
        suite.test_registered_name_is_the_objects_name(judge, registered_name_of(kinds.JUDGE, judge))
    suite.test_registered_name_is_the_objects_name(create_judge("exact"), "exact")
