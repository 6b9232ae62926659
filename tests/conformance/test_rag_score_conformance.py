"""The built-in RAG scores pass the RAG score conformance suite."""

from __future__ import annotations

from evret_core.plugins.registry import rag_score_names
from evret_core.testing import RagScoreConformance


class TestClaimScoresConformance(RagScoreConformance):
    name = "claims"


class TestAnswerMatchConformance(RagScoreConformance):
    name = "answer-match"


class TestBehaviourConformance(RagScoreConformance):
    name = "behaviour"


def test_every_built_in_score_has_a_conformance_class() -> None:
    tested = {cls.name for cls in list(globals().values())
              if isinstance(cls, type) and issubclass(cls, RagScoreConformance) and cls.name}
    assert tested == set(rag_score_names())
