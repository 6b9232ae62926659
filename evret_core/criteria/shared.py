"""What the direct and pairwise criteria judges share: the LLM settings and client, sampling, and record checks."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from pydantic import BaseModel

from evret_core.contracts.errors import EvretError
from evret_core.contracts.provider import LLMProvider
from evret_core.criteria.types import Criteria
from evret_core.llm.cache import resolve_cache
from evret_core.llm.client import LLMClient, run_all
from evret_core.llm.fencing import fence, format_field, new_nonce
from evret_core.llm.settings import LLMSettings
from evret_core.llm.structured import Structured, structured_call

DEFAULT_MAX_TRIES = 3
M = TypeVar("M", bound=BaseModel)
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
    """Base of the LLM criteria judges. Subclasses build prompts and validate answers; this class runs them.

    LLM options are those of :class:`~evret_core.llm.settings.LLMSettings` (by name, or ``settings=``): provider, model,
    key, endpoint, temperature, timeout, retries, concurrency, rate limits, cache. ``self_consistency=N``
    samples N judgments at ``sampling_temperature`` (> 0) instead of one at ``temperature``;
    ``check_positional_bias`` runs every judgment again with the order reversed; an answer that does not validate
    is sent back with the error, up to ``max_tries`` answers.
    """

    kind = "criteria"

    def __init__(
        self,
        criteria: Any = None,
        provider: str | LLMProvider | None = None,
        model: str | None = None,
        *,
        check_positional_bias: bool = False,
        self_consistency: int = 1,
        sampling_temperature: float = 0.7,
        max_tries: int = DEFAULT_MAX_TRIES,
        settings: LLMSettings | None = None,
        **options: Any,
    ) -> None:
        owner = f"judge {self.kind!r}"
        if isinstance(self_consistency, bool) or not isinstance(self_consistency, int) or \
                not 1 <= self_consistency <= 100:
            raise EvretError(f"{owner}: option 'self_consistency' must be an integer from 1 to 100, "
                             f"got {self_consistency!r}")
        if self_consistency > 1 and not (isinstance(sampling_temperature, (int, float))
                                         and 0 < sampling_temperature <= 2):
            raise EvretError(f"{owner}: self_consistency samples need option 'sampling_temperature' in (0, 2], "
                             f"got {sampling_temperature!r}")
        if isinstance(max_tries, bool) or not isinstance(max_tries, int) or not 1 <= max_tries <= 100:
            raise EvretError(f"{owner}: option 'max_tries' must be an integer from 1 to 100, got {max_tries!r}")
        given = {k: v for k, v in (("provider", provider), ("model", model)) if v is not None}
        self.settings = LLMSettings.build(owner, settings, **given, **options)
        self.criteria = criteria
        self.provider = self.settings.make_provider(owner)
        self.client = LLMClient(self.provider, self.settings, cache=resolve_cache(self.settings.cache),
                                label=self.kind)
        self.check_positional_bias = bool(check_positional_bias)
        self.self_consistency = self_consistency
        self.temperature = self.settings.temperature
        self.sampling_temperature = float(sampling_temperature)
        self.max_tries = max_tries
        self._cache_hits = 0
        # The fence code of the prompts; evaluate() draws a fresh one per run.
        self.nonce = new_nonce()

    # -- helpers for subclasses ------------------------------------------------------------------------------
    @property
    def sample_temperature(self) -> float:
        return self.sampling_temperature if self.self_consistency > 1 else self.temperature

    async def sample(self, system: str, prompt: str, schema: type[M], check: Callable[[M], M] | None,
                     payload: Mapping[str, Any]) -> list[Structured[M]]:
        """``self_consistency`` structured calls of the same prompt; ``payload`` (the un-fenced inputs) keys
        each sample's answer in the cache."""
        outcomes = list(await asyncio.gather(*(
            structured_call(self.client, system=system, prompt=prompt, schema=schema, check=check,
                            repairs=self.max_tries - 1, temperature=self.sample_temperature,
                            cache_key_extra={**payload, "sample": i})
            for i in range(self.self_consistency)
        )))
        self._cache_hits += sum(o.cached for o in outcomes)
        return outcomes

    def run(self, coros: Sequence[Any]) -> list[Any]:
        """Run the judgments concurrently, then release the provider's connections."""
        return run_all(coros, close=self.provider)

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

    def fenced(self, name: str, value: Any, names: Iterable[str] = ()) -> str:
        """A record value as prompt text, fenced as data with this run's code; ``names`` are the prompt's other
        fence names, whose look-alikes are removed too."""
        return fence(name, format_field(value), self.nonce, names)

    def context_block(self, record: Mapping[str, Any], criterion: Criteria, names: Iterable[str] = ()) -> str:
        if not criterion.context_fields:
            return ""
        names = (*names, *criterion.context_fields)
        parts = [f"[{name}]\n{self.fenced(name, record[name], names)}" for name in criterion.context_fields]
        return "Context:\n" + "\n\n".join(parts) + "\n\n"

    def usage(self) -> dict[str, Any]:
        cache = self.client.cache
        return {**self.client.usage.to_dict(), "cache_hits": self._cache_hits,
                "cache": None if cache is None else str(cache.path),
                **({"cache_read_only": True} if cache is not None and cache.read_only else {})}
