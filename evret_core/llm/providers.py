"""What every LLM provider shares beyond its contract (:mod:`evret_core.contracts.provider`): HTTP status to
:class:`LLMCallError`, redaction of keys in error messages, and :class:`SDKProvider`, the base of providers that wrap
a vendor SDK (key resolution and secrecy, a client per event loop). No SDK is imported here.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from typing import Any

from evret_core.contracts.errors import EvretError
from evret_core.contracts.provider import LLMCallError, LLMProvider

# -- HTTP status to LLMCallError: shared by every provider ----------------------------------------------------

RETRYABLE_STATUSES = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 520, 522, 524, 529})
# Statuses that no retry and no other item can get past (bad key, no access, unknown model): they stop the run.
FATAL_STATUSES = frozenset({401, 403, 404})


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
    """``text`` with every given secret and the credentials of its URLs replaced by ``***`` (error messages must
    never carry API keys): :func:`evret_core.io.redact.redact_text`, the one redaction rule."""
    from evret_core.io.redact import redact_text

    return redact_text(text, secrets)


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


def _root_cause(exc: BaseException) -> BaseException:
    """What an SDK's connection error wraps: the innermost ``OSError`` of its chain (``ConnectionRefusedError``,
    a DNS failure), else the end of its ``__cause__`` chain. (An HTTP library's chain may end in an unrelated
    exception it was handling, so the last link is not always the reason.)"""
    chain: list[BaseException] = []
    seen: set[int] = set()
    link: BaseException | None = exc
    while link is not None and id(link) not in seen:
        seen.add(id(link))
        chain.append(link)
        link = link.__cause__ or link.__context__
    errors = [link for link in chain if isinstance(link, OSError) and str(link)]
    if errors:
        return errors[-1]
    root, seen = exc, {id(exc)}
    while root.__cause__ is not None and id(root.__cause__) not in seen:  # no OSError: the end of the causes
        root = root.__cause__
        seen.add(id(root))
    return root


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
        return LLMCallError(f"{self.name}: no answer within {self.timeout} s", retryable=True, kind="timeout")

    def connection_error(self, detail: Any) -> LLMCallError:
        """The (retryable) error for a failed connection; ``detail`` describes it (an SDK's exception: its message
        and, when they differ, the innermost cause's, e.g. ``Connection refused``), with the ``base_url`` it went
        to and the key redacted."""
        text = str(detail)
        if isinstance(detail, BaseException):
            root = _root_cause(detail)
            cause = str(root)
            if root is not detail and cause and cause not in text:
                text = f"{text} ({type(root).__name__}: {cause})"
        where = f" to {self.base_url}" if self.base_url else ""
        return LLMCallError(self.redact(f"{self.name}: connection failed{where}: {text}"), retryable=True,
                            kind="connection")
