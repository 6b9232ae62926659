"""``LLMClient``: Evret's one call policy around a provider, and the helpers that run many calls at once.

At most ``max_concurrency`` calls in flight (with ``adaptive_concurrency``, halved on a 429 and grown back on
success), and within a shared :class:`~evret_core.contracts.executor.InFlightLimiter` when one is installed
(a cluster-wide bound); optional requests-per-minute and tokens-per-minute budgets, a ``timeout`` per
attempt (a provider that :attr:`~evret_core.contracts.provider.LLMProvider.enforces_timeout` is handed it and
counts its own work; any other is cancelled after it), and up to ``retries`` retries with exponential backoff and jitter on retryable failures (429, 5xx,
connection errors, timeouts), waiting at least what a Retry-After header asked. A 429 that says how long
(Retry-After) pauses every caller of the client, not just the one that got it.

Two bounds protect a run from a broken or hostile server. A Retry-After longer than the ``max_retry_after``
setting (60 s by default) is not obeyed: that call is given up at once (unmeasured), and the first such call of a
client prints one WARNING line on stderr; an obeyed wait of ``long_wait_s`` (10 s) or more is announced the same
way. An answer far longer than ``max_tokens`` could produce (:func:`answer_limit`) is not used: the call is
unmeasured and the text is never cached. Authentication, permission and unknown-model errors
(:data:`~evret_core.llm.providers.FATAL_STATUSES`) stop the run with an :class:`~evret_core.contracts.errors.EvretError`:
every other call would fail the same way.
"""

from __future__ import annotations

import asyncio
import random
import sys
import threading
import time
from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from evret_core.contracts.aio import run_sync
from evret_core.contracts.errors import EvretError
from evret_core.contracts.executor import InFlightLimiter, shared_limiter
from evret_core.contracts.provider import ChatMessage, LLMCallError, LLMProvider, LLMResponse
from evret_core.llm.cache import JudgmentCache
from evret_core.llm.providers import FATAL_STATUSES
from evret_core.llm.rate_limits import AdaptiveConcurrency, RateLimiter
from evret_core.llm.settings import LLMSettings

T = TypeVar("T")

# An answer longer than this many characters per token of ``max_tokens`` (tokens average ~4 characters; the longest
# are runs of spaces or symbols) cannot be what the model was asked for: it is not used, nor cached.
MAX_CHARS_PER_TOKEN = 64
MIN_ANSWER_LIMIT = 4096
MAX_ANSWER_CHARS = 1_000_000  # the bound when a call sets no max_tokens


def answer_limit(max_tokens: int | None) -> int:
    """The most characters an answer to a call with ``max_tokens`` may have before it is refused as oversized."""
    if max_tokens is None:
        return MAX_ANSWER_CHARS
    return max(MIN_ANSWER_LIMIT, MAX_CHARS_PER_TOKEN * int(max_tokens))


def notify(message: str) -> None:
    """One WARNING line on stderr, at once (a run that waits or gives up says so while it happens)."""
    try:
        print(f"WARNING: {message}", file=sys.stderr, flush=True)
    except (OSError, ValueError):  # a closed stderr must not fail the call
        pass


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.3g} s"
    if seconds < 2 * 86400:
        return f"{seconds:,.0f} s ({seconds / 3600:.1f} h)"
    return f"{seconds:.3g} s ({seconds / 86400:,.0f} days)"


@dataclass
class LLMUsage:
    """What calls cost: attempts, token counts, retries and failures."""

    calls: int = 0
    succeeded: int = 0
    failed: int = 0
    retries: int = 0
    input_tokens: int = 0
    output_tokens: int = 0

    def to_dict(self) -> dict[str, int]:
        return {
            "calls": self.calls,
            "succeeded": self.succeeded,
            "failed": self.failed,
            "retries": self.retries,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
        }

    def add(self, response: LLMResponse) -> None:
        self.input_tokens += int(response.input_tokens or 0)
        self.output_tokens += int(response.output_tokens or 0)


def estimate_tokens(messages: Sequence[ChatMessage]) -> int:
    """~4 characters per token (the usual estimate for English with these tokenizers) plus 4 per message."""
    return sum(len(m.content) for m in messages) // 4 + 4 * len(messages)


class LLMClient:
    """Evret's one call policy around an :class:`~evret_core.contracts.provider.LLMProvider` (see the module).

    :param provider: the provider object.
    :param settings: the :class:`~evret_core.llm.settings.LLMSettings` whose policy applies (its provider
        fields are not used here); or give its options by name (``max_retries=2, max_concurrency=8``...).
    :param cache: the answer cache that :func:`~evret_core.llm.structured.structured_call` and the judges use.
    :param label: who calls, for error messages and cache rows (``llm``, ``llm-score``, ``direct``...).
    :param shared: an :class:`~evret_core.contracts.executor.InFlightLimiter` bounding calls in flight together
        with other clients; default the process-wide one installed with
        :func:`~evret_core.contracts.executor.use_shared_limiter`.
    :param max_retry_after: overrides the settings' ``max_retry_after`` (seconds).

    :attr:`usage` counts calls, tokens and failures; :attr:`gave_up` the calls given up on a Retry-After above
    the cap (``retry_after``) and on oversized answers (``oversized``). Usable from several event loops in turn (``run_sync``
    starts a fresh loop per batch).
    """

    def __init__(
        self,
        provider: LLMProvider,
        settings: LLMSettings | None = None,
        *,
        cache: JudgmentCache | None = None,
        label: str | None = None,
        backoff_base: float = 0.5,
        backoff_max: float = 30.0,
        max_retry_after: float | None = None,
        shared: InFlightLimiter | None = None,
        **options: Any,
    ) -> None:
        self.label = label or provider.name
        if settings is None or options:
            settings = LLMSettings.build(f"{self.label} client", settings, **options)
        self.provider = provider
        self.settings = settings
        self.cache = cache
        self.max_retries = settings.retries
        # a provider that serves fewer calls at once (an in-process model) bounds them here, before the timeout
        self.max_concurrency = min(settings.max_concurrency, provider.max_concurrency or settings.max_concurrency)
        self.timeout: float | None = settings.timeout
        self.temperature = settings.temperature
        self.backoff_base = float(backoff_base)
        self.backoff_max = float(backoff_max)
        self.max_retry_after = float(settings.max_retry_after if max_retry_after is None else max_retry_after)
        self.limiter = RateLimiter(settings.rpm) if settings.rpm else None
        self.token_limiter = RateLimiter(settings.tpm) if settings.tpm else None
        self.concurrency = AdaptiveConcurrency(self.max_concurrency, settings.adaptive_concurrency)
        self.shared_limiter = shared
        self.usage = LLMUsage()
        self._resume_at = 0.0
        self._announced_until = 0.0
        self.gave_up = {"retry_after": 0, "oversized": 0}
        self._lock = threading.Lock()
        self._warmup: asyncio.Future[None] | None = None
        self._warm = False

    #: an obeyed Retry-After wait of this many seconds or more is announced on stderr
    long_wait_s = 10.0

    def backoff(self, attempt: int, retry_after: float | None = None) -> float:
        """Seconds to wait before retry number ``attempt`` (1-based): full jitter over an exponential window,
        never less than Retry-After asked."""
        window = min(self.backoff_max, self.backoff_base * (2.0 ** (attempt - 1)))
        delay = window * (0.5 + random.random() / 2)
        if retry_after is not None:
            delay = max(delay, min(retry_after, self.max_retry_after) + random.random() * 0.1)
        return delay

    async def complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        temperature: float | None = None,
        max_tokens: int | None = None,
        json_schema: Mapping[str, Any] | None = None,
    ) -> LLMResponse:
        """One completion under the policy (``temperature`` defaults to the settings'); raises the last
        :class:`LLMCallError` when every attempt failed. ``json_schema`` reaches providers that
        :attr:`~evret_core.contracts.provider.LLMProvider.constrains_json` (the others get it in the prompt only)."""
        temperature = self.temperature if temperature is None else float(temperature)
        extra: dict[str, Any] = {}
        if json_schema is not None and self.provider.constrains_json:
            extra["json_schema"] = json_schema
        # a provider that times its own work gets the timeout; the others are cancelled after it
        own_clock = self.provider.enforces_timeout
        if own_clock:
            extra["timeout"] = self.timeout
        estimate = estimate_tokens(messages) + (max_tokens or 0)
        if not self._warm:
            await self._warm_up()
        attempt = 0
        while True:
            wait = self._resume_at - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            if self.limiter is not None:
                await self.limiter.acquire()
            if self.token_limiter is not None:
                await self.token_limiter.acquire(estimate)
            epoch = await self.concurrency.acquire()
            shared = self.shared_limiter if self.shared_limiter is not None else shared_limiter()
            if shared is not None:
                try:
                    await shared.acquire()
                except BaseException:
                    self.concurrency.release(epoch)
                    raise
            ok = False
            error: LLMCallError | None = None
            try:
                self.usage.calls += 1
                try:
                    call = self.provider.acomplete(messages, temperature=temperature, max_tokens=max_tokens, **extra)
                    response = await (asyncio.wait_for(call, self.timeout) if self.timeout and not own_clock
                                      else call)
                except asyncio.TimeoutError:
                    error = LLMCallError(f"{self.provider.name}: no answer within {self.timeout:g} s",
                                         retryable=True, kind="timeout")
                except LLMCallError as exc:
                    error = exc
                except asyncio.CancelledError:
                    raise
                except Exception as exc:  # a provider bug: not worth retrying, but never a crash mid-run
                    error = LLMCallError(f"{self.provider.name}: {type(exc).__name__}: {exc}", retryable=False)
                else:
                    ok = True
            finally:
                if shared is not None:
                    shared.release()
                self.concurrency.release(epoch, rate_limited=error is not None and error.status == 429,
                                         succeeded=ok)
            if ok:
                self.usage.add(response)
                if self.token_limiter is not None:
                    used = int(response.input_tokens or 0) + int(response.output_tokens or 0)
                    if used:
                        self.token_limiter.charge(used - estimate)
                if len(response.text) > answer_limit(max_tokens):
                    self.usage.failed += 1
                    error = self._oversized(response, max_tokens)
                    del response  # the client keeps none of it (the traceback would hold this frame's locals)
                    raise error
                self.usage.succeeded += 1
                return response
            assert error is not None
            attempt += 1
            if not error.retryable or attempt > self.max_retries:
                self.usage.failed += 1
                raise error
            if error.retry_after is not None and error.retry_after > self.max_retry_after:
                self.usage.failed += 1
                raise self._refuse_wait(error)
            self.usage.retries += 1
            delay = self.backoff(attempt, error.retry_after)
            if error.retry_after is not None and delay >= self.long_wait_s:
                self._announce_wait(error, delay)
            if error.status == 429 and error.retry_after is not None:
                # The server said how long this key is rate limited: hold every caller, not only this one.
                with self._lock:
                    self._resume_at = max(self._resume_at, time.monotonic() + delay)
            await asyncio.sleep(delay)

    def _who(self) -> str:
        return f"{self.label} ({self.provider.name})" if self.label != self.provider.name else self.label

    def _refuse_wait(self, error: LLMCallError) -> LLMCallError:
        """The error of a call whose server asked for a wait above ``max_retry_after``; the first one of this
        client is announced on stderr."""
        assert error.retry_after is not None
        with self._lock:
            self.gave_up["retry_after"] += 1
            first = self.gave_up["retry_after"] == 1
        what = f"{error.label} with Retry-After {_duration(error.retry_after)}"
        if first:
            notify(f"{self._who()}: {what}, above the cap max_retry_after={self.max_retry_after:g} s: the call "
                   f"is given up as unmeasured, not retried; raise the LLM option max_retry_after to wait longer "
                   f"(later calls given up this way are counted, not shown)")
        return LLMCallError(f"{error}; {what} is above max_retry_after={self.max_retry_after:g} s: given up",
                            retryable=False, status=error.status, retry_after=error.retry_after, kind=error.kind)

    def _announce_wait(self, error: LLMCallError, delay: float) -> None:
        """One line on stderr per long pause (concurrent 429s that extend it by a jitter are not repeated)."""
        now = time.monotonic()
        with self._lock:
            if now + delay <= self._announced_until + self.long_wait_s / 2:
                return
            self._announced_until = now + delay
        assert error.retry_after is not None
        notify(f"{self._who()}: {error.label} with Retry-After {_duration(error.retry_after)}: waiting "
               f"{_duration(delay)} before retrying (such waits are capped by the LLM option "
               f"max_retry_after={self.max_retry_after:g} s)")

    def _oversized(self, response: LLMResponse, max_tokens: int | None) -> LLMCallError:
        """The error of an answer far longer than ``max_tokens`` allows: not used, not cached, announced once."""
        n = len(response.text)
        asked = f"max_tokens={max_tokens}" if max_tokens is not None else "no max_tokens"
        with self._lock:
            self.gave_up["oversized"] += 1
            first = self.gave_up["oversized"] == 1
        detail = (f"an answer of {n:,} characters, far more than a call with {asked} can produce (at most "
                  f"{answer_limit(max_tokens):,} accepted): not used, not cached")
        if first:
            notify(f"{self._who()}: {detail}; the call is unmeasured (later ones are counted, not shown)")
        return LLMCallError(f"{self.provider.name}: {detail}", retryable=False, kind="oversized")

    async def _warm_up(self) -> None:
        """Await the provider's :meth:`~evret_core.contracts.provider.LLMProvider.warmup` once (concurrent first
        calls share it), before any call's timeout starts; a failed warm-up is raised to every caller."""
        loop = asyncio.get_running_loop()
        with self._lock:
            if self._warmup is None or self._warmup.get_loop() is not loop:
                self._warmup = asyncio.ensure_future(self.provider.warmup())
            warming = self._warmup
        await asyncio.shield(warming)
        self._warm = True

    async def attempt(
        self,
        messages: Sequence[ChatMessage],
        *,
        temperature: float | None = None,
        max_tokens: int | None = None,
        json_schema: Mapping[str, Any] | None = None,
    ) -> LLMResponse | LLMCallError:
        """:meth:`complete`, with a failure returned rather than raised, except a fatal one (bad key, no access,
        unknown model), which raises an :class:`EvretError` for the whole run."""
        try:
            return await self.complete(messages, temperature=temperature, max_tokens=max_tokens,
                                       json_schema=json_schema)
        except LLMCallError as exc:
            if exc.status in FATAL_STATUSES:
                raise EvretError(
                    f"{self.label}: provider {self.provider.name!r} (model {self.provider.model!r}) refused the "
                    f"request, stopping: {exc}; check the API key, the model name and base_url"
                ) from None
            return exc

    def store(self, key: str, response: LLMResponse) -> None:
        """Commit one answer to the cache at once (a killed run keeps it)."""
        if self.cache is not None:
            self.cache.put(key, response.text, judge=self.label, provider=self.provider.name,
                           model=self.provider.model, input_tokens=response.input_tokens,
                           output_tokens=response.output_tokens)

    def cached(self, key: str) -> str | None:
        """The cached answer under ``key``, or None."""
        if self.cache is None:
            return None
        row = self.cache.get_many([key]).get(key)
        return None if row is None else str(row["answer"])

    async def aclose(self) -> None:
        await self.provider.aclose()


async def gather_all(coros: Sequence[Awaitable[T]]) -> list[T]:
    """Run ``coros`` concurrently; when one fails, cancel the others and wait for them before raising, so that
    no call is left running and no connection open."""
    tasks = [asyncio.ensure_future(c) for c in coros]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


def run_all(coros: Sequence[Awaitable[T]], close: LLMProvider | None = None) -> list[T]:
    """:func:`gather_all` from sync code (inside a running event loop too), then ``close``'s connections: an
    SDK client belongs to the loop it was made on, and that loop ends with this call."""
    async def go() -> list[T]:
        try:
            return await gather_all(coros)
        finally:
            if close is not None:
                await close.aclose()

    return run_sync(go())
