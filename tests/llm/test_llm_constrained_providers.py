"""What the LLM layer gives a provider that constrains its output or bounds its own concurrency (an in-process
model): the JSON schema of a structured call, and calls queued before their timeout starts."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest
from pydantic import BaseModel

from evret_core.contracts.errors import EvretError
from evret_core.contracts.provider import ChatMessage, LLMProvider, LLMResponse
from evret_core.llm.client import LLMClient
from evret_core.llm.settings import LLMSettings
from evret_core.llm.structured import structured_call
from evret_core.rag.scores.relevance import RelevanceGrade
from evret_core.scoring.llm_score import ScoreAnswer


class Verdict(BaseModel):
    label: str
    score: int


class Recording(LLMProvider):
    """Answers valid JSON after ``delay`` seconds and records the keywords of every call and the most calls it
    had in flight at once."""

    name = "recording"

    def __init__(self, delay: float = 0.0) -> None:
        super().__init__("m")
        self.delay = delay
        self.keywords: list[dict[str, Any]] = []
        self.in_flight = self.most_in_flight = 0

    async def acomplete(self, messages: Sequence[ChatMessage], **keywords: Any) -> LLMResponse:
        self.keywords.append(keywords)
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            await asyncio.sleep(self.delay)
        finally:
            self.in_flight -= 1
        return LLMResponse('{"label": "ok", "score": 3}', 1, 1)


class Constraining(Recording):
    constrains_json = True


def ask(provider: LLMProvider, **settings: Any) -> Any:
    client = LLMClient(provider, LLMSettings(provider=provider, **settings))
    return asyncio.run(structured_call(client, system="s", prompt="p", schema=Verdict))


def test_a_constraining_provider_gets_the_schema_and_others_do_not() -> None:
    constraining, plain = Constraining(), Recording()
    assert ask(constraining).value == Verdict(label="ok", score=3)
    assert ask(plain).value == Verdict(label="ok", score=3)
    assert constraining.keywords[0]["json_schema"] == Verdict.model_json_schema()
    assert "json_schema" not in plain.keywords[0]  # providers without it keep the two-keyword signature


def test_free_text_calls_carry_no_schema() -> None:
    provider = Constraining()
    client = LLMClient(provider, LLMSettings(provider=provider))
    asyncio.run(client.complete([ChatMessage("user", "hi")], max_tokens=4))
    assert "json_schema" not in provider.keywords[0]


def test_a_provider_that_serves_one_call_at_a_time_is_sent_one() -> None:
    class Serial(Recording):
        max_concurrency = 1

    provider = Serial(delay=0.05)
    client = LLMClient(provider, LLMSettings(provider=provider, max_concurrency=16, timeout=0.2))

    async def many() -> list[Any]:
        return list(await asyncio.gather(*(client.attempt([ChatMessage("user", str(i))]) for i in range(8))))

    answers = asyncio.run(many())
    # 8 calls of 0.05 s each, one at a time: 0.4 s in all, yet none times out at 0.2 s (queued before the timeout)
    assert all(isinstance(a, LLMResponse) for a in answers)
    assert provider.most_in_flight == 1 and client.max_concurrency == 1


def test_the_one_to_five_ranges_are_in_the_schemas() -> None:
    """So that a constraining provider keeps them (the validators still say why a value is refused)."""
    for model, field in ((ScoreAnswer, "score"), (RelevanceGrade, "grade")):
        schema = model.model_json_schema()
        assert schema["properties"][field]["minimum"] == 1 and schema["properties"][field]["maximum"] == 5
        assert field in schema["required"]


def test_the_claim_judge_and_direct_judge_schemas_name_the_allowed_values() -> None:
    """A constraining provider gets the context ids and option names as enums; validation is unchanged."""
    from evret_core.criteria.direct import DirectAnswer
    from evret_core.llm.choices import with_choices
    from evret_core.rag.claims.llm_judge import ClaimCheck, check_schema

    schema = check_schema(["doc-1", "doc-2", "doc-1"]).model_json_schema()
    for field in ("supporting_context_ids", "contradicting_context_ids"):
        assert schema["properties"][field]["items"] == {"type": "string", "enum": ["doc-1", "doc-2"]}
    assert check_schema(["doc-1", "doc-2"]) is check_schema(["doc-1", "doc-2"])  # one class per id set
    assert issubclass(check_schema(["a"]), ClaimCheck) and check_schema([]) is ClaimCheck
    assert check_schema(["a"]).model_validate({"verdict": "supported", "supporting_context_ids": ["zz"]})

    class Judging(Constraining):
        async def acomplete(self, messages: Sequence[ChatMessage], **keywords: Any) -> LLMResponse:
            self.keywords.append(keywords)
            return LLMResponse('{"explanation": "fine", "selected_option": "yes"}', 1, 1)

    from evret_core.plugins.registry import create_evaluator

    provider = Judging()
    results = create_evaluator("direct", criteria="Is it polite?", provider=provider, cache=False).evaluate(
        [{"input": "Hello.", "output": "Thank you."}])
    sent = provider.keywords[0]["json_schema"]["properties"]["selected_option"]
    assert sent["enum"] == ["Yes", "No"] and results.scores[0] is not None
    assert with_choices(DirectAnswer, selected_option=["A"]).model_validate(
        {"explanation": "e", "selected_option": "B"}).selected_option == "B"


class SlowToLoad(Recording):
    """Takes ``load`` seconds to warm up (a model loaded or converted on first use), then answers at once."""

    def __init__(self, load: float) -> None:
        super().__init__()
        self.load = load
        self.warmups = 0

    async def warmup(self) -> None:
        self.warmups += 1
        await asyncio.sleep(self.load)


def test_warmup_runs_once_before_the_first_call_and_outside_its_timeout() -> None:
    provider = SlowToLoad(load=0.3)
    client = LLMClient(provider, LLMSettings(provider=provider, timeout=0.1, retries=0))

    async def three_calls() -> list[Any]:
        return await asyncio.gather(*(structured_call(client, system="s", prompt=f"p{i}", schema=Verdict)
                                      for i in range(3)))

    answers = asyncio.run(three_calls())
    assert [a.value for a in answers] == [Verdict(label="ok", score=3)] * 3  # the 0.3 s load timed out nothing
    assert provider.warmups == 1
    asyncio.run(structured_call(client, system="s", prompt="again", schema=Verdict))
    assert provider.warmups == 1


def test_a_warmup_that_fails_stops_the_call_with_its_error() -> None:
    class CannotLoad(Recording):
        async def warmup(self) -> None:
            raise EvretError("model 'x.gguf' cannot load: not a GGUF file")

    provider = CannotLoad()
    client = LLMClient(provider, LLMSettings(provider=provider, retries=0))
    with pytest.raises(EvretError, match="cannot load"):
        asyncio.run(structured_call(client, system="s", prompt="p", schema=Verdict))
    assert provider.keywords == []  # no call was attempted
