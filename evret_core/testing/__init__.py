"""Testing kit for Evret and its plugins: conformance suites, (``evret_core.testing.llm_stubs``) HTTP stub
servers speaking the LLM providers' wire formats, and (``evret_core.testing.vectorstores``) a small corpus and a
deterministic embedder for vector-store retriever tests. Conformance suites: subclass one in your plugin's tests so every judge and retriever
behaves alike.

The conformance suites need pytest (``pip install "evret-core[testing]"``); they are loaded on first use, so
the stub servers and the vector-store kit import without it. A judge plugin's test module::

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

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from evret_core.testing.judges import JudgeConformance
    from evret_core.testing.providers import ProviderConformance
    from evret_core.testing.retrievers import RetrieverConformance

__all__ = ["JudgeConformance", "ProviderConformance", "RetrieverConformance"]

_SUITES = {"JudgeConformance": "evret_core.testing.judges", "ProviderConformance": "evret_core.testing.providers",
           "RetrieverConformance": "evret_core.testing.retrievers"}


def __getattr__(name: str) -> Any:
    """The conformance suites, imported when first asked for (they import pytest)."""
    if name not in _SUITES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    try:
        module = importlib.import_module(_SUITES[name])
    except ModuleNotFoundError as exc:
        if exc.name != "pytest":
            raise
        raise ImportError(f"evret_core.testing.{name} needs pytest: pip install 'evret-core[testing]'") from None
    return getattr(module, name)
