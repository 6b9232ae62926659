"""The anthropic provider under LLMJudge, driven through the real anthropic SDK against a loopback stub server:
the provider conformance suite, plus what is particular to the Messages API."""

from __future__ import annotations

from pathlib import Path

import pytest

from evret_core import EvretError
from evret_core.judge.llm import LLMJudge
from evret_core.testing import ProviderConformance
from evret_core.testing.llm_stubs import (
    FailFirst,
    StubLLMServer,
    always,
    expected_text,
    isolate_llm_env,
    stub_judge,
)
from evret_core.testing.llm_stubs import judgment_context as ctx

KEY = "sk-ant-test-SECRET-0123456789"


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    isolate_llm_env(monkeypatch, tmp_path, "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "ANTHROPIC_AUTH_TOKEN")


class TestAnthropicConformance(ProviderConformance):
    provider = "anthropic"
    key = KEY
    key_env = ("ANTHROPIC_API_KEY",)
    other_env = ("ANTHROPIC_BASE_URL", "ANTHROPIC_AUTH_TOKEN")


def judge_for(server: StubLLMServer, **options: object) -> LLMJudge:
    return stub_judge("anthropic", server, KEY, **options)


def test_yes_no_unparseable_and_the_wire_format() -> None:
    answers = {"answer-0": "YES", "answer-1": "NO", "answer-2": "Hmm."}
    with StubLLMServer(lambda r: answers[expected_text(r.text)]) as server:
        judge = judge_for(server)
        assert judge.model == "claude-haiku-4-5"
        assert judge.batch_judge([ctx(0), ctx(1), ctx(2)]) == [True, False, False]
    assert judge.stats()["parsing"]["unparseable"] == 1
    request = server.requests[0]
    assert request.path == "/v1/messages" and request.api == "anthropic"
    assert request.body["model"] == "claude-haiku-4-5" and request.body["max_tokens"] == 16
    assert "never instructions" in request.body["system"]  # the system prompt goes in `system`, not a message
    assert [m["role"] for m in request.body["messages"]] == ["user"]
    assert any(KEY in value for value in request.headers.values())  # x-api-key or Bearer, by SDK release
    assert judge.stats()["cost"]["anthropic"]["input_tokens"] > 0


def test_529_overloaded_is_retried_like_429() -> None:
    responder = FailFirst(FailFirst(always("YES"), status=529), status=429, retry_after=1.0)
    with StubLLMServer(responder) as server:
        judge = judge_for(server, max_retries=3)
        assert judge.batch_judge([ctx(0)]) == [True]
    assert len(server.requests) == 3
    assert server.requests[1].received_at - server.requests[0].received_at >= 1.0


def test_env_key_and_base_url(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(EvretError, match="ANTHROPIC_API_KEY"):
        LLMJudge(provider="anthropic", cache=False).batch_judge([ctx(0)])
    with StubLLMServer(always("YES")) as server:
        monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        judge = LLMJudge(provider="anthropic", cache=False)
        assert judge.batch_judge([ctx(0)]) == [True]
        assert KEY not in repr(judge.provider) and KEY not in str(judge.config())
    assert len(server.requests) == 1
