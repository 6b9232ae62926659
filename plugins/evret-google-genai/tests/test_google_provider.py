"""The google provider under LLMJudge, driven through the real google-genai SDK against a loopback stub server."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from evret_core import EvretError
from evret_core.judges.llm import LLMJudge
from evret_core.testing.llm_stubs import (
    FailFirst,
    StubLLMServer,
    StubReply,
    always,
    expected_text,
    isolate_llm_env,
    stub_judge,
)
from evret_core.testing.llm_stubs import judgment_context as ctx

KEY = "AIza-test-SECRET-0123456789"


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    isolate_llm_env(monkeypatch, tmp_path, "GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GEMINI_BASE_URL",
                    "GOOGLE_GENAI_USE_VERTEXAI")


def judge_for(server: StubLLMServer, **options: object) -> LLMJudge:
    return stub_judge("google", server, KEY, **options)


def test_yes_no_unparseable_and_the_wire_format() -> None:
    answers = {"answer-0": "Yes", "answer-1": "no", "answer-2": "maybe?"}
    with StubLLMServer(lambda r: answers[expected_text(r.text)]) as server:
        judge = judge_for(server)
        assert judge.model == "gemini-2.5-flash"
        assert judge.batch_judge([ctx(0), ctx(1), ctx(2)]) == [True, False, False]
    assert judge.stats()["parsing"]["unparseable"] == 1
    request = server.requests[0]
    assert request.api == "gemini" and request.path.endswith("/models/gemini-2.5-flash:generateContent")
    assert "never instructions" in request.system  # systemInstruction, not a user turn
    assert request.body["generationConfig"] == {"temperature": 0.0, "maxOutputTokens": 16}
    assert request.headers.get("x-goog-api-key") == KEY
    assert judge.stats()["cost"]["google"]["input_tokens"] > 0


def test_sdk_retries_are_off_and_429_retry_after_is_honoured() -> None:
    with StubLLMServer(FailFirst(always("YES"), status=429, retry_after=1.0)) as server:
        judge = judge_for(server, max_retries=0)
        assert judge.batch_judge([ctx(0)]) == [None]  # no Evret retry: the SDK made exactly one attempt
        assert len(server.requests) == 1
    with StubLLMServer(FailFirst(always("YES"), status=429, retry_after=1.0)) as server:
        judge = judge_for(server, max_retries=2)
        assert judge.batch_judge([ctx(0)]) == [True]
    assert len(server.requests) == 2
    assert server.requests[1].received_at - server.requests[0].received_at >= 1.0


def test_500s_exhaust_retries_and_leave_the_judgment_unmeasured() -> None:
    with StubLLMServer(lambda r: StubReply(status=500)) as server:
        judge = judge_for(server, max_retries=2)
        assert judge.batch_judge([ctx(0)]) == [None]
    assert len(server.requests) == 3


def test_a_hanging_server_times_out() -> None:
    with StubLLMServer(always("YES", delay=30)) as server:
        judge = judge_for(server, timeout=0.5, max_retries=1)
        started = time.monotonic()
        assert judge.batch_judge([ctx(0)]) == [None]
    assert time.monotonic() - started < 6 and len(server.requests) == 2
    assert judge.stats()["errors"] == {"timeout": 1}


def test_concurrency_bound_seen_by_the_server() -> None:
    with StubLLMServer(always("YES", delay=0.2)) as server:
        judge = judge_for(server, max_concurrency=4)
        assert judge.batch_judge([ctx(i) for i in range(16)]) == [True] * 16
    assert server.max_in_flight == 4


def test_env_keys_and_base_url(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(EvretError, match="GEMINI_API_KEY"):
        LLMJudge(provider="google", cache=False).batch_judge([ctx(0)])
    with StubLLMServer(always("YES")) as server:
        monkeypatch.setenv("GOOGLE_API_KEY", KEY)
        monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", server.url)
        judge = LLMJudge(provider="google", cache=False)
        assert judge.batch_judge([ctx(0)]) == [True]
        assert KEY not in repr(judge.provider) and KEY not in str(judge.config())
    assert len(server.requests) == 1 and server.requests[0].headers.get("x-goog-api-key") == KEY
