"""The LLM provider contract for providers that run a model in this process (no server, no key), as tests.

A plugin whose provider talks to no HTTP endpoint (``transformers``) subclasses
:class:`InProcessProviderConformance` instead of :class:`~evret_core.testing.ProviderConformance` (whose checks
are about wire formats, statuses and keys) and overrides :meth:`~InProcessProviderConformance.options`: the LLM
options that build the provider on a small model, and :meth:`~InProcessProviderConformance.bad_options`. Each
check drives the provider through the same judges and evaluators users run.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest

from evret_core.contracts import kinds
from evret_core.contracts.errors import EvretError
from evret_core.testing.llm_stubs import isolate_llm_env
from evret_core.testing.llm_stubs import judgment_context as ctx
from evret_core.testing.suite import Conformance


class InProcessProviderConformance(Conformance):
    """Override :meth:`options` (``provider``, ``model``, ``provider_options``... of a small model) and
    :meth:`bad_options` (``(options, the option the error must name)`` pairs)."""

    kind = kinds.LLM_PROVIDER

    @pytest.fixture
    def subject(self) -> Any:
        return self.provider()

    @pytest.fixture
    def registered_name(self) -> str | None:
        return str(self.options()["provider"])

    def options(self) -> dict[str, Any]:
        raise NotImplementedError("return the LLM options that build the provider on a small model")

    def bad_options(self) -> list[tuple[dict[str, Any], str]]:
        return []

    @pytest.fixture(autouse=True)
    def _isolated_env(self, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
        isolate_llm_env(monkeypatch, tmp_path)

    def provider(self, **extra: Any) -> Any:
        from evret_core.llm.settings import LLMSettings

        return LLMSettings.build("conformance", **{**self.options(), **extra}).make_provider()

    def test_every_judgment_measured_and_usage_counted(self) -> None:
        from evret_core.judge.llm import LLMJudge

        judge = LLMJudge(**self.options(), cache=False)
        verdicts = judge.batch_judge([ctx(i) for i in range(3)])
        assert all(v in (True, False) for v in verdicts), verdicts  # an in-process call has nothing to lose
        stats = judge.stats()
        cost = stats["cost"][judge.provider.name]
        assert cost["calls"] == 3 and cost["succeeded"] == 3 and cost["failed"] == 0
        assert cost["input_tokens"] > 0 and cost["output_tokens"] > 0
        assert stats["unmeasured"] == 0

    def test_temperature_zero_is_deterministic(self) -> None:
        from evret_core.contracts.provider import ChatMessage

        messages = [ChatMessage("system", "Answer briefly."), ChatMessage("user", "Name a colour.")]
        first = asyncio.run(self.provider().acomplete(messages, temperature=0.0, max_tokens=12))
        again = asyncio.run(self.provider().acomplete(messages, temperature=0.0, max_tokens=12))
        assert first.text == again.text and first.output_tokens == again.output_tokens > 0

    def test_structured_answers_through_llm_score(self) -> None:
        from evret_core.plugins.registry import create_evaluator

        evaluator = create_evaluator("llm-score", template="Question {input} Answer {output}", cache=False,
                                     max_tries=1, **self.options())
        records = [{"input": f"question {i}", "output": f"answer {i}"} for i in range(3)]
        results = evaluator.evaluate(records)
        if self.provider().constrains_json:  # constrained decoding: every first answer is usable
            assert all(d.get("tries") == 1 and "raw_score" in d for d in results.details), results.details
            assert all(s is not None and 0.0 <= s <= 1.0 for s in results.scores)
        else:
            assert len(results.scores) == 3

    def test_a_call_past_its_timeout_is_unmeasured_and_frees_the_model(self) -> None:
        from evret_core.judge.llm import LLMJudge

        slow = LLMJudge(**self.options(), cache=False, timeout=0.001, max_retries=0)
        assert slow.batch_judge([ctx(0), ctx(1)]) == [None, None]
        assert slow.stats()["errors"] == {"timeout": 2}
        started = time.monotonic()
        assert LLMJudge(**self.options(), cache=False).batch_judge([ctx(2)])[0] in (True, False)
        assert time.monotonic() - started < 60  # the cancelled calls let go of the model

    def test_calls_beyond_the_providers_bound_wait_before_their_timeout(self) -> None:
        from evret_core.judge.llm import LLMJudge

        judge = LLMJudge(**self.options(), cache=False, max_concurrency=16)
        bound = judge.provider.max_concurrency
        if bound is not None:
            assert judge.client.max_concurrency == min(16, bound)

    def test_config_is_json_and_the_same_for_the_same_options(self) -> None:
        config = self.provider().config()
        assert json.loads(json.dumps(config)) == config == self.provider().config()
        assert config["provider"] == self.provider().name

    def test_bad_options_fail_at_once_naming_the_option(self) -> None:
        for options, name in self.bad_options():
            with pytest.raises(EvretError, match=f"option '{name}'") as info:
                self.provider(**options)
            assert "\n" not in str(info.value)
