"""Structured output through one forced Anthropic tool, driven through the real anthropic SDK against a loopback
stub server: the schema as the ``answer`` tool's input schema, its ``tool_use`` input parsed end to end and shown
as JSON text in a repair turn, text blocks still read from a server that ignores tools, and the YES/NO judge left as
it was."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from evret_core.contracts.generation import Answer
from evret_core.rag.scores.relevance import LLMRelevance, RelevanceGrade
from evret_core.testing.llm_stubs import StubLLMServer, StubRequest, always, isolate_llm_env, stub_judge
from evret_core.testing.llm_stubs import judgment_context as ctx

KEY = "sk-ant-test-SECRET-0123456789"


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    isolate_llm_env(monkeypatch, tmp_path, "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "ANTHROPIC_AUTH_TOKEN")


def grade(server: StubLLMServer, question: str, text: str, **options: Any) -> tuple[float | None, LLMRelevance]:
    part = LLMRelevance(provider="anthropic", api_key=KEY, base_url=server.url, cache=False, **options)

    async def go() -> float | None:
        try:
            return await part.ascore(question, Answer(text=text))
        finally:
            await part.aclose()

    return asyncio.run(go()), part


def test_the_relevance_grade_goes_as_a_forced_tool_and_its_tool_use_input_is_parsed() -> None:
    with StubLLMServer(always('{"grade": 4, "reason": "mostly"}')) as server:
        score, part = grade(server, "Who founded the library?", "Clara Vos.")
    assert score == 0.75
    (request,) = server.requests
    schema = RelevanceGrade.model_json_schema()
    assert request.body["tools"] == [{"name": "answer", "description": "Give your answer as this tool's input.",
                                      "input_schema": schema}]
    assert request.body["tool_choice"] == {"type": "tool", "name": "answer"}
    assert request.json_schema == schema and '"grade"' in request.body["system"]
    stats = part.stats()
    assert stats["calls"] == stats["succeeded"] == 1 and stats["unmeasured"] == {} and stats["output_tokens"] > 0


def test_an_invalid_tool_input_goes_back_as_json_text_for_repair() -> None:
    answers = iter(['{"grade": 9, "reason": "off the scale"}', '{"grade": 1, "reason": "no"}'])

    def respond(request: StubRequest) -> str:
        return next(answers)

    with StubLLMServer(respond) as server:
        score, part = grade(server, "Who founded the library?", "It rained.")
    assert score == 0.0 and len(server.requests) == 2
    first = server.requests[1].body["messages"]
    assert [m["role"] for m in first] == ["user", "assistant", "user"]
    assert json.loads(first[1]["content"]) == {"grade": 9, "reason": "off the scale"}  # the tool input, as text
    assert "'grade' must be an integer from 1 to 5" in first[2]["content"]
    assert server.requests[1].body["tool_choice"] == {"type": "tool", "name": "answer"}


def test_a_server_that_ignores_the_tool_is_read_from_its_text() -> None:
    # the stub answers a text block when the text is no JSON object, as a proxy that drops `tools` would
    with StubLLMServer(always('Here it is: ```json\n{"grade": 3}\n```')) as server:
        score, _ = grade(server, "Who founded the library?", "Someone.")
    assert score == 0.5 and server.requests[0].json_schema is not None


def test_the_yes_no_judge_sends_no_tool() -> None:
    with StubLLMServer(always("YES")) as server:
        judge = stub_judge("anthropic", server, KEY)
        assert judge.batch_judge([ctx(0)]) == [True]
    body = server.requests[0].body
    assert "tools" not in body and "tool_choice" not in body and server.requests[0].json_schema is None
