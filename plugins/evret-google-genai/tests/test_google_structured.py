"""Structured output through Gemini's ``responseJsonSchema``, driven through the real google-genai SDK against a
loopback stub server: the schema and JSON MIME type on the wire, the answer parsed end to end, and the YES/NO
judge left as it was."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from evret_core.contracts.generation import Answer
from evret_core.rag.scores.relevance import LLMRelevance, RelevanceGrade
from evret_core.testing.llm_stubs import StubLLMServer, always, isolate_llm_env, stub_judge
from evret_core.testing.llm_stubs import judgment_context as ctx

KEY = "AIza-test-SECRET-0123456789"


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    isolate_llm_env(monkeypatch, tmp_path, "GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GEMINI_BASE_URL",
                    "GOOGLE_GENAI_USE_VERTEXAI")


def test_the_relevance_grade_goes_as_a_response_json_schema_and_its_answer_is_parsed() -> None:
    async def go(part: LLMRelevance) -> float | None:
        try:
            return await part.ascore("Who founded the library?", Answer(text="Clara Vos."))
        finally:
            await part.aclose()

    with StubLLMServer(always('{"grade": 5, "reason": "names the founder"}')) as server:
        part = LLMRelevance(provider="google", api_key=KEY, base_url=server.url, cache=False, max_tokens=100)
        assert asyncio.run(go(part)) == 1.0
    (request,) = server.requests
    schema = RelevanceGrade.model_json_schema()
    assert request.body["generationConfig"] == {"temperature": 0.0, "maxOutputTokens": 100,
                                                "responseMimeType": "application/json",
                                                "responseJsonSchema": schema}
    assert request.json_schema == schema and '"grade"' in request.system
    assert part.stats()["unmeasured"] == {} and part.stats()["input_tokens"] > 0


def test_the_yes_no_judge_sends_no_schema() -> None:
    with StubLLMServer(always("NO")) as server:
        judge = stub_judge("google", server, KEY)
        assert judge.batch_judge([ctx(0)]) == [False]
    assert server.requests[0].body["generationConfig"] == {"temperature": 0.0, "maxOutputTokens": 16}
    assert server.requests[0].json_schema is None
