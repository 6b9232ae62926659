"""The conformance suite of each kind of :data:`evret_core.contracts.kinds.KINDS`: ``SUITES[kind]`` is the class a
plugin's test class of that kind subclasses (it imports pytest, as every suite does)."""

from __future__ import annotations

from typing import Any

from evret_core.contracts import kinds
from evret_core.contracts.kinds import Kind
from evret_core.testing.claim_judge_suite import ClaimJudgeConformance
from evret_core.testing.executor_suite import ExecutorConformance
from evret_core.testing.generator_suite import GeneratorConformance
from evret_core.testing.judge_suite import JudgeConformance
from evret_core.testing.metric_suite import MetricConformance
from evret_core.testing.output_evaluator_suite import OutputEvaluatorConformance
from evret_core.testing.perturbation_suite import PerturbationConformance
from evret_core.testing.provider_suite import ProviderConformance
from evret_core.testing.rag_score_suite import RagScoreConformance
from evret_core.testing.reranker_suite import RerankerConformance
from evret_core.testing.retrieval_evaluator_suite import RetrievalEvaluatorConformance
from evret_core.testing.retriever_suite import RetrieverConformance
from evret_core.testing.rewriter_suite import RewriterConformance

SUITES: dict[Kind[Any], type] = {
    kinds.JUDGE: JudgeConformance,
    kinds.METRIC: MetricConformance,
    kinds.RETRIEVER: RetrieverConformance,
    kinds.EVALUATOR: OutputEvaluatorConformance,
    kinds.RETRIEVAL_EVALUATOR: RetrievalEvaluatorConformance,
    kinds.LLM_PROVIDER: ProviderConformance,
    kinds.GENERATOR: GeneratorConformance,
    kinds.PERTURBATION: PerturbationConformance,
    kinds.CLAIM_JUDGE: ClaimJudgeConformance,
    kinds.RAG_SCORE: RagScoreConformance,
    kinds.EXECUTOR: ExecutorConformance,
    kinds.RERANKER: RerankerConformance,
    kinds.REWRITER: RewriterConformance,
}
"""Kind -> its conformance suite, in the order of the table of kinds."""
