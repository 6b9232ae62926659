"""What the direct and pairwise criteria judges share: the provider, sampling, and record checks."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any, TypeVar

from pydantic import BaseModel

from evret_core.criteria.types import Criteria
from evret_core.errors import EvretError
from evret_core.evaluators.llm_support import (
    DEFAULT_MAX_TRIES,
    Completer,
    Outcome,
    fence,
    format_field,
    new_nonce,
    structured_call,
)
from evret_core.llm import ChatMessage, LLMProvider

T = TypeVar("T")
K = TypeVar("K", bound=Hashable)


class PositionalBias(BaseModel):
    """The verdict with the options (direct) or responses (pairwise) in reverse order, and whether it changed.

    ``detected`` is None when either run was unmeasured.
    """

    detected: bool | None
    reversed_verdict: Any = None
    error: str | None = None


class Consistency(BaseModel):
    """Self-consistency over ``samples`` judgments at temperature > 0: the votes, majority and agreement rate."""

    samples: int
    measured_samples: int
    votes: dict[str, int]
    majority: Any = None
    agreement_rate: float | None = None


def majority_vote(values: Sequence[K]) -> tuple[K, float]:
    """The most frequent value (ties: the one seen first) and the share of ``values`` that agree with it."""
    counts = Counter(values)
    best = max(counts.values())
    winner = next(v for v in values if counts[v] == best)
    return winner, best / len(values)


def mean(values: Sequence[float | None]) -> float | None:
    """The mean of the measured (not None) values; None when there are none."""
    measured = [v for v in values if v is not None]
    return sum(measured) / len(measured) if measured else None


def bias_summary(flags: Sequence[bool | None]) -> dict[str, Any]:
    """How many instances had their positional bias checked (flag not None) and in how many the verdict changed."""
    checked = [f for f in flags if f is not None]
    detected = sum(1 for f in checked if f)
    return {"checked": len(checked), "detected": detected, "rate": detected / len(checked) if checked else None}


class CriteriaJudge:
    """Base of the LLM criteria judges. Subclasses build prompts and parse answers; this class runs them.

    ``self_consistency=N`` samples N judgments at ``sampling_temperature`` (> 0) instead of one at
    ``temperature``; ``check_positional_bias`` runs every judgment again with the order reversed.
    """

    kind = "criteria"

    def __init__(
        self,
        criteria: Any = None,
        provider: str | LLMProvider = "openai",
        model: str | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        provider_options: Mapping[str, Any] | None = None,
        check_positional_bias: bool = False,
        self_consistency: int = 1,
        temperature: float = 0.0,
        sampling_temperature: float = 0.7,
        max_tries: int = DEFAULT_MAX_TRIES,
        max_concurrency: int = 8,
        requests_per_minute: float | None = None,
        cache: Any = None,
    ) -> None:
        owner = f"judge {self.kind!r}"
        if isinstance(self_consistency, bool) or not isinstance(self_consistency, int) or self_consistency < 1:
            raise EvretError(f"{owner}: option 'self_consistency' must be a positive integer, got {self_consistency!r}")
        if self_consistency > 1 and not sampling_temperature > 0:
            raise EvretError(f"{owner}: self_consistency samples need option 'sampling_temperature' > 0, "
                             f"got {sampling_temperature!r}")
        if isinstance(max_tries, bool) or not isinstance(max_tries, int) or max_tries < 1:
            raise EvretError(f"{owner}: option 'max_tries' must be a positive integer, got {max_tries!r}")
        self.criteria = criteria
        self.completer = Completer.for_provider(provider, model, base_url, api_key, provider_options, owner=owner,
                                                judge=self.kind, max_concurrency=max_concurrency,
                                                requests_per_minute=requests_per_minute, cache=cache)
        self.provider = self.completer.provider
        self.check_positional_bias = bool(check_positional_bias)
        self.self_consistency = self_consistency
        self.temperature = float(temperature)
        self.sampling_temperature = float(sampling_temperature)
        self.max_tries = max_tries
        # The fence code of the prompts; evaluate() draws a fresh one per run.
        self.nonce = new_nonce()

    # -- helpers for subclasses ------------------------------------------------------------------------------
    @property
    def sample_temperature(self) -> float:
        return self.sampling_temperature if self.self_consistency > 1 else self.temperature

    async def sample(self, messages: Sequence[ChatMessage], parse: Callable[[str], T],
                     payload: Mapping[str, Any]) -> list[Outcome[T]]:
        """``self_consistency`` structured calls of the same messages; ``payload`` (the un-fenced inputs) keys
        each sample's answer in the cache."""
        return list(await asyncio.gather(*(
            structured_call(self.completer, messages, parse, temperature=self.sample_temperature,
                            max_tries=self.max_tries, cache_payload={**payload, "sample": i})
            for i in range(self.self_consistency)
        )))

    def run(self, coros: Sequence[Any]) -> list[Any]:
        """Run the judgments concurrently, then release the provider's connections if this judge made it."""
        return self.completer.run(coros)

    @staticmethod
    def check_fields(records: Sequence[Mapping[str, Any]], criteria: Sequence[Criteria]) -> None:
        """Every record has every field a criterion reads; checked before any call, naming the record."""
        for i, record in enumerate(records):
            if not isinstance(record, Mapping):
                raise EvretError(f"record {i + 1}: expected an object, got {type(record).__name__}")
            for criterion in criteria:
                for name in [criterion.to_evaluate_field, *criterion.context_fields]:
                    if record.get(name) is None:
                        raise EvretError(
                            f"record {i + 1}: criterion {criterion.name!r} reads field {name!r}, and the record "
                            f"has no such field (fields: {', '.join(sorted(record)) or 'none'})")

    def fenced(self, name: str, value: Any) -> str:
        """A record value as prompt text, fenced as data with this run's code."""
        return fence(name, format_field(value), self.nonce)

    def context_block(self, record: Mapping[str, Any], criterion: Criteria) -> str:
        if not criterion.context_fields:
            return ""
        parts = [f"[{name}]\n{self.fenced(name, record[name])}" for name in criterion.context_fields]
        return "Context:\n" + "\n\n".join(parts) + "\n\n"

    def usage(self) -> dict[str, int]:
        return self.completer.usage()
