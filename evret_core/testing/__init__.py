"""Testing kit for Evret and its plugins: conformance suites, (``evret_core.testing.llm_stubs``) HTTP stub
servers speaking the LLM providers' wire formats, and (``evret_core.testing.vectorstore_kit``) a small corpus and a
deterministic embedder for vector-store retriever tests.

One conformance suite per kind of plugin; subclass your kind's in your plugin's tests so that every plugin of a
kind behaves alike (docs/writing-a-plugin.md lists them): ``JudgeConformance``, ``RetrieverConformance``,
``ProviderConformance`` (LLM providers; ``InProcessProviderConformance`` for one that runs a model in
process), ``MetricConformance``, ``OutputEvaluatorConformance`` (evaluators of
records, criteria judges included), ``RetrievalEvaluatorConformance``, ``GeneratorConformance``,
``PerturbationConformance`` (adversarial families), ``ClaimJudgeConformance`` (RAG claim judges),
``RagScoreConformance``, ``ExecutorConformance``, ``RerankerConformance`` and ``RewriterConformance``; ``SUITES`` maps each kind of
:data:`evret_core.contracts.kinds.KINDS` to its suite.

The kit needs pytest (``pip install pytest``, the extra ``testing``); importing any of it without pytest is an
``ImportError`` that says so. A judge plugin's test module::

    from evret_core.testing import JudgeConformance

    class TestMyJudge(JudgeConformance):
        @pytest.fixture
        def judge(self):
            return MyJudge()

A retriever plugin overrides the ``retriever`` fixture and, usually, ``queries`` (queries that find documents in
its corpus). An LLM provider plugin subclasses ``ProviderConformance`` and sets ``provider`` (its registered
name) and ``key_env``. A metric sets ``family`` and its values on the suite's known case; a perturbation sets
``family``; generators, output evaluators and executors override the fixture of their name. Every ``test_*``
method of the base class then runs against your object.
(``evret_core.testing.llm_provider``) holds ``stub``, a provider with no SDK, for tests that need any provider.
"""

from __future__ import annotations

try:
    import pytest  # noqa: F401  (the suites below are pytest classes)
except ModuleNotFoundError as exc:
    if exc.name != "pytest":
        raise
    raise ImportError('evret_core.testing needs pytest: pip install pytest (the extra "testing")') from None

from evret_core.testing.claim_judge_suite import ClaimJudgeConformance
from evret_core.testing.executor_suite import ExecutorConformance
from evret_core.testing.generator_suite import GeneratorConformance
from evret_core.testing.judge_suite import JudgeConformance
from evret_core.testing.local_providers import InProcessProviderConformance
from evret_core.testing.metric_suite import MetricConformance
from evret_core.testing.output_evaluator_suite import OutputEvaluatorConformance
from evret_core.testing.perturbation_suite import PerturbationConformance
from evret_core.testing.provider_suite import ProviderConformance
from evret_core.testing.rag_score_suite import RagScoreConformance
from evret_core.testing.reranker_suite import RerankerConformance
from evret_core.testing.retrieval_evaluator_suite import RetrievalEvaluatorConformance
from evret_core.testing.retriever_suite import RetrieverConformance
from evret_core.testing.rewriter_suite import RewriterConformance
from evret_core.testing.suites import SUITES

__all__ = [
    "ClaimJudgeConformance",
    "ExecutorConformance",
    "GeneratorConformance",
    "InProcessProviderConformance",
    "JudgeConformance",
    "MetricConformance",
    "OutputEvaluatorConformance",
    "PerturbationConformance",
    "ProviderConformance",
    "RagScoreConformance",
    "RerankerConformance",
    "RetrievalEvaluatorConformance",
    "RetrieverConformance",
    "RewriterConformance",
    "SUITES",
]
