"""The LLM provider contract, as tests: a provider plugin's test class subclasses :class:`ProviderConformance`.

Each test drives the provider through :class:`~evret_core.judge.llm.LLMJudge` (or ``llm-score``) against a
:class:`~evret_core.testing.llm_stubs.StubLLMServer` speaking the provider's wire format, with the provider's
real SDK. The provider makes one attempt per call (Evret's client retries), maps statuses to
:class:`~evret_core.contracts.provider.LLMCallError`, honours the timeout, and never shows its key. Wire-format details (which
header carries the key, where the system prompt goes) stay in the plugin's own tests.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

from evret_core.contracts import kinds
from evret_core.contracts.errors import EvretError
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
from evret_core.testing.suite import Conformance


class ProviderConformance(Conformance):
    """Set ``provider`` (the registered name), ``key_env`` (the variables its key may come from, first
    preferred) and ``other_env`` (other variables to clear: base URL...); override :meth:`base_url` when the
    SDK wants more than the stub's root URL (OpenAI: ``server.openai_base_url``)."""

    kind = kinds.LLM_PROVIDER

    @pytest.fixture
    def subject(self) -> Iterator[Any]:
        with StubLLMServer(always("YES")) as server:
            yield self.judge_for(server).provider

    @pytest.fixture
    def registered_name(self) -> str | None:
        return self.provider

    provider: ClassVar[str] = ""
    key: ClassVar[str] = "sk-conformance-SECRET-0123456789"
    key_env: ClassVar[tuple[str, ...]] = ()
    other_env: ClassVar[tuple[str, ...]] = ()

    def base_url(self, server: StubLLMServer) -> str:
        return server.url

    @pytest.fixture(autouse=True)
    def _isolated_env(self, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
        if not self.provider:
            raise NotImplementedError("set `provider` to the registered provider name")
        isolate_llm_env(monkeypatch, tmp_path, *self.key_env, *self.other_env)

    def judge_for(self, server: StubLLMServer, **options: Any) -> Any:
        return stub_judge(self.provider, server, self.key, base_url=self.base_url(server), **options)

    def test_answers_parsed_and_usage_counted(self) -> None:
        answers = {"answer-0": "YES", "answer-1": "No.", "answer-2": "Hmm."}
        with StubLLMServer(lambda r: answers[expected_text(r.text)]) as server:
            judge = self.judge_for(server)
            assert judge.batch_judge([ctx(0), ctx(1), ctx(2)]) == [True, False, False]
        stats = judge.stats()
        assert stats["parsing"]["unparseable"] == 1
        cost = stats["cost"][self.provider]
        assert cost["calls"] == 3 and cost["input_tokens"] > 0 and cost["output_tokens"] > 0
        assert all(r.model == judge.model for r in server.requests)
        assert any(self.key in value for value in server.requests[0].headers.values())

    def test_one_attempt_per_call_and_retry_after_honoured(self) -> None:
        with StubLLMServer(FailFirst(always("YES"), status=429, retry_after=1.0)) as server:
            judge = self.judge_for(server, max_retries=0)
            assert judge.batch_judge([ctx(0)]) == [None]  # the SDK's own retries are off
            assert len(server.requests) == 1
        with StubLLMServer(FailFirst(always("YES"), status=429, retry_after=1.0)) as server:
            judge = self.judge_for(server, max_retries=2)
            assert judge.batch_judge([ctx(0)]) == [True]
        assert len(server.requests) == 2
        assert server.requests[1].received_at - server.requests[0].received_at >= 1.0

    def test_server_errors_exhaust_retries_and_leave_the_judgment_unmeasured(self) -> None:
        with StubLLMServer(lambda r: StubReply(status=500)) as server:
            judge = self.judge_for(server, max_retries=2)
            assert judge.batch_judge([ctx(0)]) == [None]
        assert len(server.requests) == 3
        assert judge.stats()["unmeasured"] == 1 and judge.stats()["errors"] == {"HTTP 500": 1}

    def test_a_hanging_server_times_out(self) -> None:
        hang = lambda r: always("YES", delay=30)(r) if expected_text(r.text) == "answer-0" else "YES"  # noqa: E731
        with StubLLMServer(hang) as server:
            assert self.judge_for(server).batch_judge([ctx(1)]) == [True]  # warm-up: import the SDK untimed
            judge = self.judge_for(server, timeout=0.5, max_retries=0)
            started = time.monotonic()
            assert judge.batch_judge([ctx(0)]) == [None]
        # a loaded machine may not even deliver the request within 0.5 s; either way the judgment times out
        assert time.monotonic() - started < 10 and len(server.requests) <= 2
        assert judge.stats()["errors"] == {"timeout": 1}

    def test_concurrency_bound_seen_by_the_server(self) -> None:
        with StubLLMServer(always("YES", delay=0.2)) as server:
            judge = self.judge_for(server, max_concurrency=4)
            assert judge.batch_judge([ctx(i) for i in range(16)]) == [True] * 16
        assert server.max_in_flight == 4

    def test_missing_key_names_the_variable_and_refusal_never_shows_the_key(self) -> None:
        from evret_core.judge.llm import LLMJudge

        with StubLLMServer(lambda r: StubReply(status=401)) as server:
            with pytest.raises(EvretError, match=self.key_env[0] if self.key_env else "key"):
                LLMJudge(provider=self.provider, cache=False, base_url=self.base_url(server)).batch_judge([ctx(0)])
            judge = self.judge_for(server)
            with pytest.raises(EvretError, match="refused") as info:
                judge.batch_judge([ctx(0)])
        assert self.key not in str(info.value)
        assert self.key not in repr(judge.provider) and self.key not in json.dumps(judge.config())

    def test_structured_answers_through_llm_score(self) -> None:
        from evret_core.plugins.registry import create_evaluator

        with StubLLMServer(always('{"score": 5, "reasoning": "grounded"}')) as server:
            evaluator = create_evaluator("llm-score", template="Q {input} A {output}", provider=self.provider,
                                         api_key=self.key, base_url=self.base_url(server), cache=False)
            results = evaluator.evaluate([{"input": "q", "output": "a"}])
        assert results.scores == [1.0] and results.details[0]["reasoning"] == "grounded"
        assert '"score"' in server.requests[0].system
        # a provider that takes the schema (constrains_json) sends it in its API's own way; the others do not
        from evret_core.scoring.llm_score import LLMScoreEvaluator, ScoreAnswer

        assert isinstance(evaluator, LLMScoreEvaluator)
        expected = ScoreAnswer.model_json_schema() if evaluator.provider.constrains_json else None
        assert server.requests[0].json_schema == expected

    @pytest.mark.parametrize("headers", [{"Retry-After": "99999999"},
                                         {"Retry-After": "Fri, 31 Dec 9999 23:59:59 GMT"},
                                         {"retry-after-ms": "1e15"}], ids=["seconds", "http-date", "ms"])
    def test_absurd_retry_after_is_not_obeyed_and_says_so(self, headers: dict[str, str],
                                                          capsys: pytest.CaptureFixture[str]) -> None:
        """A 429 asking for a wait above ``max_retry_after`` gives the call up at once: unmeasured, one request,
        one WARNING line naming the option (the red-team run waited 905 s)."""
        with StubLLMServer(lambda r: StubReply(status=429, headers=headers)) as server:
            judge = self.judge_for(server, max_retries=3, max_retry_after=0.5)
            started = time.monotonic()
            assert judge.batch_judge([ctx(0), ctx(1)]) == [None, None]
        assert time.monotonic() - started < 5 and len(server.requests) == 2
        assert judge.stats()["errors"] == {"HTTP 429": 2} and judge.client.gave_up["retry_after"] == 2
        warnings = [line for line in capsys.readouterr().err.splitlines() if line.startswith("WARNING")]
        assert len(warnings) == 1, warnings
        assert "HTTP 429" in warnings[0] and "max_retry_after=0.5 s" in warnings[0] and "given up" in warnings[0]

    def test_a_long_retry_after_within_the_cap_is_waited_and_announced(self,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
        with StubLLMServer(FailFirst(always("YES"), status=429, retry_after=0.4)) as server:
            judge = self.judge_for(server, max_retries=1, max_retry_after=2)
            judge.client.long_wait_s = 0.3
            assert judge.batch_judge([ctx(0)]) == [True]
        assert len(server.requests) == 2 and server.requests[1].received_at - server.requests[0].received_at >= 0.4
        err = capsys.readouterr().err
        assert "Retry-After 0.4 s: waiting" in err and "max_retry_after=2 s" in err

    def test_an_answer_far_beyond_max_tokens_is_unmeasured_and_never_cached(
            self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """The red-team's 40 MB answer to max_tokens=16 became a 42 MB cache row; 4 MB here."""
        cache = tmp_path / "huge.sqlite3"
        with StubLLMServer(always("YES " + "A" * 4_000_000)) as server:
            judge = self.judge_for(server, cache=str(cache))
            assert judge.batch_judge([ctx(0)]) == [None]
        assert judge.stats()["errors"] == {"oversized": 1} and judge.stats()["unmeasured"] == 1
        assert judge.cache is not None and judge.cache.stats()["entries"] == 0
        assert sum(f.stat().st_size for f in tmp_path.glob("huge.sqlite3*")) < 200_000
        assert "4,000,004 characters" in capsys.readouterr().err
