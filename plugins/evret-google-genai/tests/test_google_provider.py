"""The google provider under LLMJudge, driven through the real google-genai SDK against a loopback stub server:
the provider conformance suite, plus what is particular to generateContent."""

from __future__ import annotations

from pathlib import Path

import pytest

from evret_core import EvretError
from evret_core.judge.llm import LLMJudge
from evret_core.testing import ProviderConformance
from evret_core.testing.llm_stubs import (
    StubLLMServer,
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


class TestGoogleConformance(ProviderConformance):
    provider = "google"
    key = KEY
    key_env = ("GEMINI_API_KEY", "GOOGLE_API_KEY")
    other_env = ("GOOGLE_GEMINI_BASE_URL", "GOOGLE_GENAI_USE_VERTEXAI")


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
