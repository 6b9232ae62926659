"""The built-in ``retrieval`` evaluator passes the retrieval evaluator conformance suite."""

from __future__ import annotations

from typing import Any, ClassVar

from evret_core.testing import RetrievalEvaluatorConformance


class TestRetrievalConformance(RetrievalEvaluatorConformance):
    name = "retrieval"


class TestRetrievalWithTokenOverlapConformance(RetrievalEvaluatorConformance):
    name = "retrieval"
    options: ClassVar[dict[str, Any]] = {"judge": "token-overlap"}
