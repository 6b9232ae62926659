"""The ``semantic-similarity`` output evaluator passes Evret's output evaluator conformance suite, on the packaged
model (loaded once for the session by the ``loaded_judge`` fixture)."""

from __future__ import annotations

from typing import Any

import pytest
from evret_sentence_transformers import SemanticJudge

from evret_core import create_evaluator
from evret_core.testing import OutputEvaluatorConformance


class TestSemanticSimilarityConformance(OutputEvaluatorConformance):
    @pytest.fixture
    def evaluator(self, loaded_judge: SemanticJudge) -> Any:
        return create_evaluator("semantic-similarity")
