"""The provider-agnostic LLM interface that provider plugins implement (no SDK is imported here).

A provider (registered through ``register_llm_providers``) turns chat messages into text plus token usage,
asynchronously. Retries, backoff, rate limits, concurrency bounds, caching and cost accounting are Evret's job,
not the provider's: providers make exactly one attempt per call and raise :class:`LLMCallError` saying whether
the failure is worth retrying. :class:`SDKProvider` holds what every provider wrapping a vendor SDK repeats
(key resolution and secrecy, a client per event loop, HTTP status to :class:`LLMCallError`).
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from evret_core.errors import EvretError


@dataclass
class ChatMessage:
    """One chat message: ``role`` is ``system``, ``user`` or ``assistant``."""

    role: str
    content: str


@dataclass
class LLMResponse:
    """What one successful call returned."""

    text: str
    input_tokens: int = 0
    output_tokens: int = 0
    model: str | None = None
    raw: dict[str, Any] = field(default_factory=dict)


class LLMCallError(Exception):
    """One call failed. ``retryable`` for 429, 5xx, connection errors and timeouts; ``retry_after`` in seconds
    when the server said how long to wait (Retry-After)."""

    def __init__(
        self,
        message: str,
        *,
        retryable: bool,
        status: int | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.status = status
        self.retry_after = retry_after


class LLMProvider(ABC):
    """An async chat-completion endpoint. ``name`` is the registered provider name, ``model`` the model used."""

    name: str = "provider"
    default_model: str = ""

    def __init__(self, model: str | None = None) -> None:
        self.model = model or self.default_model

    @abstractmethod
    async def acomplete(
        self,
        messages: Sequence[ChatMessage],
        *,
        temperature: float = 0.0,
        max_tokens: int | None = None,
    ) -> LLMResponse:
        """One attempt at a chat completion; raise :class:`LLMCallError` on failure (never retry here)."""

    async def aclose(self) -> None:
        """Release connections; called once when a judge or evaluator is done with the provider."""
        return None

    def config(self) -> dict[str, Any]:
        """Identifying settings for manifests and cache keys. Never include API keys."""
        return {"provider": self.name, "model": self.model}


# -- Evret's call policy: shared by every LLM-backed judge and evaluator ------------------------------------------

RETRYABLE_STATUSES = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 520, 522, 524, 529})


def is_retryable_status(status: int | None) -> bool:
    """429, 408 and 5xx are worth retrying; other 4xx (bad request, auth) are not."""
    if status is None:
        return True
    return status in RETRYABLE_STATUSES or status >= 500


def parse_retry_after(headers: Any) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``retry-after`` (seconds or an HTTP date); None when absent."""
    if headers is None:
        return None
    try:
        ms = headers.get("retry-after-ms")
    except Exception:  # headers of an unexpected type: no hint rather than a crash
        return None
    if ms:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    from email.utils import parsedate_to_datetime

    try:
        when = parsedate_to_datetime(str(value))
    except (TypeError, ValueError):
        return None
    import datetime as _dt

    if when.tzinfo is None:
        when = when.replace(tzinfo=_dt.timezone.utc)
    return max(0.0, (when - _dt.datetime.now(_dt.timezone.utc)).total_seconds())


def redact(text: str, *secrets: str | None) -> str:
    """``text`` with every given secret replaced by ``***`` (error messages must never carry API keys)."""
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, "***")
    return text


def status_error(
    source: str,
    status: int | None,
    message: Any,
    headers: Any = None,
    secrets: Sequence[str | None] = (),
) -> LLMCallError:
    """The :class:`LLMCallError` for an HTTP error answer: ``"<source>: HTTP <status>: <message>"`` with the
    secrets redacted, retryable by :func:`is_retryable_status`, ``retry_after`` from the headers."""
    return LLMCallError(
        redact(f"{source}: HTTP {status}: {message}", *secrets),
        retryable=is_retryable_status(status),
        status=status,
        retry_after=parse_retry_after(headers),
    )


class SDKProvider(LLMProvider):
    """Base of providers that wrap a vendor SDK's async client (the core imports no SDK; subclasses do).

    It resolves the API key (``api_key``, else the first set variable of ``api_key_env``; an :class:`EvretError`
    naming them when none is), keeps it out of ``repr()``, :meth:`config` and error messages, builds one SDK
    client per event loop through :meth:`_make_client` (``run_sync`` may start a loop per batch), closes it in
    :meth:`aclose`, and maps failures to :class:`LLMCallError` (:meth:`status_error`, :meth:`timeout_error`,
    :meth:`connection_error`). Subclasses set ``name``, ``default_model``, ``api_key_env`` and implement
    :meth:`_make_client` and :meth:`acomplete`.
    """

    api_key_env: tuple[str, ...] = ()

    def __init__(
        self,
        model: str | None = None,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float | None = 60.0,
    ) -> None:
        import os

        super().__init__(model)
        key = api_key or next((os.environ[n] for n in self.api_key_env if os.environ.get(n)), None)
        if not key:
            raise EvretError(f"{self.name} provider: no API key; pass api_key=... or set "
                             f"{' or '.join(self.api_key_env)}")
        self.__key = key  # name-mangled and never in config() or repr()
        self.base_url = base_url
        self.timeout = timeout
        self._client: Any = None
        self._loop: Any = None

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r}, base_url={self.base_url!r})"

    def config(self) -> dict[str, Any]:
        return {"provider": self.name, "model": self.model, "base_url": self.base_url}

    @abstractmethod
    def _make_client(self, api_key: str) -> Any:
        """A new SDK async client with the SDK's own retries off (Evret's :class:`LLMClient` retries)."""

    async def _close_client(self, client: Any) -> None:
        """Release one client made by :meth:`_make_client`; the default awaits ``client.close()``."""
        await client.close()

    def _sdk(self) -> Any:
        """The SDK client for the running event loop, made on first use in each loop."""
        import asyncio

        # The SDK's HTTP pool belongs to one event loop; run_sync may start a new loop per batch.
        loop = asyncio.get_running_loop()
        if self._client is None or self._loop is not loop:
            self._client = self._make_client(self.__key)
            self._loop = loop
        return self._client

    async def aclose(self) -> None:
        client, self._client, self._loop = self._client, None, None
        if client is not None:
            await self._close_client(client)

    def redact(self, text: str) -> str:
        """``text`` without this provider's API key."""
        return redact(text, self.__key)

    def status_error(self, status: int | None, message: Any, headers: Any = None) -> LLMCallError:
        """The error for an HTTP error answer (see :func:`status_error`), the key redacted."""
        return status_error(self.name, status, message, headers, (self.__key,))

    def timeout_error(self) -> LLMCallError:
        """The (retryable) error for an attempt that got no answer within :attr:`timeout`."""
        return LLMCallError(f"{self.name}: no answer within {self.timeout} s", retryable=True)

    def connection_error(self, detail: Any) -> LLMCallError:
        """The (retryable) error for a failed connection; ``detail`` describes it, the key redacted."""
        return LLMCallError(self.redact(f"{self.name}: connection failed: {detail}"), retryable=True)


@dataclass
class LLMUsage:
    """What calls to one provider cost: attempts, token counts, retries and failures."""

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


class RateLimiter:
    """Spaces request starts evenly so that at most ``requests_per_minute`` start in any minute."""

    def __init__(self, requests_per_minute: float) -> None:
        if requests_per_minute <= 0:
            raise ValueError("requests_per_minute must be positive")
        self.interval = 60.0 / float(requests_per_minute)
        self._next = 0.0
        self._lock = threading.Lock()

    async def acquire(self) -> None:
        import asyncio
        import time

        # Reserve a start slot under a thread lock (the limiter may be shared by loops in several threads),
        # then sleep outside it until the slot comes.
        with self._lock:
            now = time.monotonic()
            slot = max(now, self._next)
            self._next = slot + self.interval
        delay = slot - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)


class LLMClient:
    """Evret's one call policy around an :class:`LLMProvider`.

    At most ``max_concurrency`` calls in flight, an optional ``requests_per_minute`` limit, a ``timeout`` per
    attempt, and up to ``max_retries`` retries with exponential backoff and jitter on retryable failures (429,
    5xx, connection errors, timeouts), waiting at least what a Retry-After header asked. A 429 pauses every
    caller of this client, not just the one that got it, when it says how long (Retry-After). :attr:`usage` counts calls, tokens and failures.
    Usable from several event loops in turn (``run_sync`` starts a fresh loop per batch).
    """

    def __init__(
        self,
        provider: LLMProvider,
        *,
        max_retries: int = 3,
        max_concurrency: int = 16,
        requests_per_minute: float | None = None,
        timeout: float | None = 60.0,
        backoff_base: float = 0.5,
        backoff_max: float = 30.0,
        max_retry_after: float = 300.0,
    ) -> None:
        if int(max_retries) < 0:
            raise ValueError("max_retries must be >= 0")
        if int(max_concurrency) < 1:
            raise ValueError("max_concurrency must be >= 1")
        self.provider = provider
        self.max_retries = int(max_retries)
        self.max_concurrency = int(max_concurrency)
        self.timeout = None if timeout is None else float(timeout)
        self.backoff_base = float(backoff_base)
        self.backoff_max = float(backoff_max)
        self.max_retry_after = float(max_retry_after)
        self.limiter = RateLimiter(requests_per_minute) if requests_per_minute else None
        self.usage = LLMUsage()
        self._semaphores: dict[int, Any] = {}
        self._resume_at = 0.0
        self._lock = threading.Lock()

    def _semaphore(self) -> Any:
        import asyncio

        # One semaphore per event loop: an asyncio primitive must not be shared between loops.
        loop = asyncio.get_running_loop()
        with self._lock:
            sem = self._semaphores.get(id(loop))
            if sem is None or getattr(sem, "_evret_loop", None) is not loop:
                sem = asyncio.Semaphore(self.max_concurrency)
                sem._evret_loop = loop  # type: ignore[attr-defined]
                self._semaphores = {id(loop): sem}
            return sem

    def backoff(self, attempt: int, retry_after: float | None = None) -> float:
        """Seconds to wait before retry number ``attempt`` (1-based): full jitter over an exponential window,
        never less than Retry-After asked."""
        import random

        window = min(self.backoff_max, self.backoff_base * (2.0 ** (attempt - 1)))
        delay = window * (0.5 + random.random() / 2)
        if retry_after is not None:
            delay = max(delay, min(retry_after, self.max_retry_after) + random.random() * 0.1)
        return delay

    async def complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        temperature: float = 0.0,
        max_tokens: int | None = None,
    ) -> LLMResponse:
        """One completion under the policy; raises the last :class:`LLMCallError` when every attempt failed."""
        import asyncio
        import time

        attempt = 0
        while True:
            wait = self._resume_at - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            if self.limiter is not None:
                await self.limiter.acquire()
            async with self._semaphore():
                self.usage.calls += 1
                try:
                    call = self.provider.acomplete(messages, temperature=temperature, max_tokens=max_tokens)
                    response = await (asyncio.wait_for(call, self.timeout) if self.timeout else call)
                except asyncio.TimeoutError:
                    error = LLMCallError(f"{self.provider.name}: no answer within {self.timeout:g} s",
                                         retryable=True)
                except LLMCallError as exc:
                    error = exc
                except asyncio.CancelledError:
                    raise
                except Exception as exc:  # a provider bug: not worth retrying, but never a crash mid-run
                    error = LLMCallError(f"{self.provider.name}: {type(exc).__name__}: {exc}", retryable=False)
                else:
                    self.usage.succeeded += 1
                    self.usage.input_tokens += int(response.input_tokens or 0)
                    self.usage.output_tokens += int(response.output_tokens or 0)
                    return response
            attempt += 1
            if not error.retryable or attempt > self.max_retries:
                self.usage.failed += 1
                raise error
            self.usage.retries += 1
            delay = self.backoff(attempt, error.retry_after)
            if error.status == 429 and error.retry_after is not None:
                # The server said how long this key is rate limited: hold every caller, not only this one.
                self._resume_at = max(self._resume_at, time.monotonic() + delay)
            await asyncio.sleep(delay)

    async def aclose(self) -> None:
        await self.provider.aclose()
