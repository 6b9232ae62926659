"""Structured output through OpenAI's ``response_format`` ``json_schema``, driven through the real openai SDK
against a loopback stub server: the schema on the wire (strict when the schema allows it), an answer parsed end
to end by a structured caller, the ``json_schema`` option that turns it off, and the YES/NO judge left as it was."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from evret_openai.provider import response_format, strict_compatible
from pydantic import BaseModel, ConfigDict

from evret_core import EvretError
from evret_core.contracts.generation import Answer
from evret_core.llm.client import LLMClient
from evret_core.llm.structured import Structured, structured_call
from evret_core.plugins.registry import create_llm_provider
from evret_core.rag.scores.relevance import LLMRelevance, RelevanceGrade
from evret_core.testing.llm_stubs import StubLLMServer, StubReply, always, isolate_llm_env, stub_judge
from evret_core.testing.llm_stubs import judgment_context as ctx

KEY = "sk-test-SECRET-key-0123456789"


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    isolate_llm_env(monkeypatch, tmp_path, "OPENAI_API_KEY", "OPENAI_BASE_URL")


class Span(BaseModel):
    model_config = ConfigDict(extra="forbid")
    start: int
    end: int


class Closed(BaseModel):
    """Strict-compatible: extra="forbid" everywhere, no defaults (a nested model goes through $defs/$ref)."""

    model_config = ConfigDict(extra="forbid")
    label: str
    spans: list[Span]


class OpenNested(BaseModel):
    """Closed at the root, but its nested model allows extra keys: not strict-compatible."""

    model_config = ConfigDict(extra="forbid")
    label: str
    span: dict[str, int]


def relevance(server: StubLLMServer, **options: Any) -> LLMRelevance:
    return LLMRelevance(provider="openai", model="gpt-stub", api_key=KEY, base_url=server.openai_base_url,
                        cache=False, **options)


def grade(part: LLMRelevance, question: str, text: str) -> float | None:
    async def go() -> float | None:
        try:
            return await part.ascore(question, Answer(text=text))
        finally:
            await part.aclose()

    return asyncio.run(go())


def ask(server: StubLLMServer, schema: type[BaseModel], **provider_options: Any) -> Structured[Any]:
    provider = create_llm_provider("openai", model="gpt-stub", api_key=KEY, base_url=server.openai_base_url,
                                   **provider_options)
    client = LLMClient(provider, max_retries=0)

    async def go() -> Structured[Any]:
        try:
            return await structured_call(client, system="Label it.", prompt="text", schema=schema)
        finally:
            await client.aclose()

    return asyncio.run(go())


def test_the_relevance_grade_goes_as_a_json_schema_response_format_and_its_answer_is_parsed() -> None:
    with StubLLMServer(always('{"grade": 5, "reason": "on topic"}')) as server:
        part = relevance(server)
        assert grade(part, "Who founded the library?", "Clara Vos founded it.") == 1.0
    (request,) = server.requests
    schema = RelevanceGrade.model_json_schema()
    # `reason` has a default (not required): the schema cannot be strict, so it goes with strict false
    assert request.body["response_format"] == {
        "type": "json_schema", "json_schema": {"name": "answer", "schema": schema, "strict": False}}
    assert request.json_schema == schema
    assert '"grade"' in request.system  # the schema stays in the system message too
    stats = part.stats()
    assert stats["structured_calls"] == stats["calls"] == 1 and stats["unmeasured"] == {} and stats["input_tokens"] > 0


def test_a_strict_compatible_schema_goes_strict_and_others_do_not() -> None:
    with StubLLMServer(always('{"label": "x", "spans": [{"start": 0, "end": 4}]}')) as server:
        result = ask(server, Closed)
    assert result.value == Closed(label="x", spans=[Span(start=0, end=4)]) and result.tries == 1
    sent = server.requests[0].body["response_format"]["json_schema"]
    assert sent["strict"] is True and sent["schema"] == Closed.model_json_schema() and "$defs" in sent["schema"]
    assert strict_compatible(Closed.model_json_schema())
    for schema in (RelevanceGrade, OpenNested):  # a default; an object open to any key
        assert not strict_compatible(schema.model_json_schema())
        assert response_format(schema.model_json_schema())["json_schema"]["strict"] is False
    ref_with_sibling = {"type": "object", "additionalProperties": False, "required": ["a"],
                        "properties": {"a": {"$ref": "#/$defs/A", "description": "one A"}},
                        "$defs": {"A": {"type": "string"}}}
    assert not strict_compatible(ref_with_sibling)  # strict mode refuses a $ref beside other keywords
    assert not strict_compatible({"type": "string"})  # the root must be an object


def test_the_json_schema_option_off_sends_the_schema_in_the_prompt_only() -> None:
    with StubLLMServer(always('{"grade": 2}')) as server:
        part = relevance(server, provider_options={"json_schema": False})
        assert grade(part, "Who founded the library?", "It is old.") == 0.25
    (request,) = server.requests
    assert "response_format" not in request.body and request.json_schema is None
    assert '"grade"' in request.system


def test_a_json_schema_option_that_is_no_boolean_is_refused_naming_it() -> None:
    with pytest.raises(EvretError, match=r"openai provider: option 'json_schema' must be true or false, got 'no'"):
        create_llm_provider("openai", api_key=KEY, json_schema="no")


def test_a_refusal_is_the_answer_text_sent_back_for_repair() -> None:
    refusal = {"id": "chatcmpl-stub", "object": "chat.completion", "created": 0, "model": "gpt-stub",
               "choices": [{"index": 0, "finish_reason": "stop", "logprobs": None,
                            "message": {"role": "assistant", "content": None, "refusal": "I cannot grade this."}}],
               "usage": {"prompt_tokens": 5, "completion_tokens": 5, "total_tokens": 10}}
    replies = iter([StubReply(body=refusal), StubReply('{"label": "x", "spans": []}')])
    with StubLLMServer(lambda request: next(replies)) as server:
        result = ask(server, Closed)
    assert result.value == Closed(label="x", spans=[]) and result.answers[0] == "I cannot grade this."
    repair = server.requests[1].body["messages"]
    assert repair[2] == {"role": "assistant", "content": "I cannot grade this."}
    assert repair[3]["content"].startswith("Your answer could not be used")


def test_the_yes_no_judge_sends_no_response_format() -> None:
    with StubLLMServer(always("YES")) as server:
        judge = stub_judge("openai", server, KEY, base_url=server.openai_base_url)
        assert judge.batch_judge([ctx(0)]) == [True]
    assert set(server.requests[0].body) == {"model", "messages", "temperature", "max_tokens"}
