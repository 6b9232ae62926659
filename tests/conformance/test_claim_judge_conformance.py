"""The built-in claim judges pass the claim judge conformance suite: ``lexical`` over ``token-overlap`` and over
``contains``, and ``llm`` through the test kit's ``stub`` provider against the RAG stub model."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from evret_core.plugins.registry import claim_judge_names, create_claim_judge
from evret_core.testing import ClaimJudgeConformance
from evret_core.testing.llm_provider import stub_options
from evret_core.testing.llm_stubs import StubLLMServer, isolate_llm_env
from evret_core.testing.rag_stub import rag_responder


@pytest.mark.parametrize("over", ["token-overlap", "contains"])
class TestLexicalClaimJudgeConformance(ClaimJudgeConformance):
    @pytest.fixture
    def claim_judge(self, over: str) -> Any:
        return create_claim_judge("lexical", judge=over)


class TestLLMClaimJudgeConformance(ClaimJudgeConformance):
    @pytest.fixture
    def claim_judge(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
        isolate_llm_env(monkeypatch, tmp_path, "EVRET_STUB_API_KEY")
        with StubLLMServer(rag_responder()) as server:
            yield create_claim_judge("llm", **stub_options(server), cache=False)


def test_every_built_in_claim_judge_is_tested() -> None:
    assert set(claim_judge_names()) == {"lexical", "llm"}
