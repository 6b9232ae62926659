"""Testing kit for Evret and its plugins: conformance suites, (``evret_core.testing.llm_stubs``) HTTP stub
servers speaking the LLM providers' wire formats, and (``evret_core.testing.vectorstores``) a small corpus and a
deterministic embedder for vector-store retriever tests. Conformance suites: subclass one in your plugin's tests so every judge and retriever
behaves alike.

Needs pytest. A judge plugin's test module::

    from evret_core.testing import JudgeConformance

    class TestMyJudge(JudgeConformance):
        @pytest.fixture
        def judge(self):
            return MyJudge()

A retriever plugin overrides the ``retriever`` fixture and, usually, ``queries`` (queries that find documents in
its corpus). An LLM provider plugin subclasses ``ProviderConformance`` and sets ``provider`` (its registered
name) and ``key_env``. Every ``test_*`` method of the base class then runs against your object.
(``evret_core.testing.llm_provider``) holds ``stub``, a provider with no SDK, for tests that need any provider.
"""

from evret_core.testing.judges import JudgeConformance
from evret_core.testing.providers import ProviderConformance
from evret_core.testing.retrievers import RetrieverConformance

__all__ = ["JudgeConformance", "ProviderConformance", "RetrieverConformance"]
