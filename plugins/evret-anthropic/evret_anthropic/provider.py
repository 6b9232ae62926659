"""The ``anthropic`` provider: one Messages API attempt per call through the SDK's async client.

The SDK's own retries are off (``max_retries=0``): Evret's :class:`~evret_core.llm.LLMClient` is the only retry
policy. The key comes from ``api_key`` or ``ANTHROPIC_API_KEY``; the endpoint from ``base_url``, else
``ANTHROPIC_BASE_URL`` (read by the SDK), else Anthropic's.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from typing import Any

from evret_anthropic import DEFAULT_MODEL
from evret_core.errors import EvretError
from evret_core.llm import (
    ChatMessage,
    LLMCallError,
    LLMProvider,
    LLMResponse,
    is_retryable_status,
    parse_retry_after,
    redact,
)

# The Messages API requires max_tokens; a judge's answer is one word, but leave room for a short sentence.
DEFAULT_MAX_TOKENS = 64


def _accepts_temperature(client: Any) -> bool:
    """Recent SDK releases dropped sampling parameters from ``messages.create`` (current models ignore or reject
    them); send ``temperature`` only where the installed SDK still takes it."""
    import inspect

    try:
        return "temperature" in inspect.signature(client.messages.create).parameters
    except (TypeError, ValueError):
        return False


class AnthropicProvider(LLMProvider):
    """Claude through the Messages API. Default model: ``claude-haiku-4-5``."""

    name = "anthropic"
    default_model = DEFAULT_MODEL

    def __init__(
        self,
        model: str | None = None,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float | None = 60.0,
    ) -> None:
        super().__init__(model)
        key = api_key or os.environ.get("ANTHROPIC_API_KEY")
        if not key:
            raise EvretError("anthropic provider: no API key; pass api_key=... or set ANTHROPIC_API_KEY")
        self.__key = key  # name-mangled and never in config() or repr()
        self.base_url = base_url
        self.timeout = timeout
        self._client: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def __repr__(self) -> str:
        return f"AnthropicProvider(model={self.model!r}, base_url={self.base_url!r})"

    def config(self) -> dict[str, Any]:
        return {"provider": self.name, "model": self.model, "base_url": self.base_url}

    def _sdk(self) -> Any:
        # The SDK's HTTP pool belongs to one event loop; run_sync may start a new loop per batch.
        loop = asyncio.get_running_loop()
        if self._client is None or self._loop is not loop:
            from anthropic import AsyncAnthropic

            self._client = AsyncAnthropic(api_key=self.__key, base_url=self.base_url, timeout=self.timeout,
                                          max_retries=0)
            self._loop = loop
        return self._client

    async def acomplete(
        self,
        messages: Sequence[ChatMessage],
        *,
        temperature: float = 0.0,
        max_tokens: int | None = None,
    ) -> LLMResponse:
        import anthropic

        client = self._sdk()
        system = "\n\n".join(m.content for m in messages if m.role == "system")
        chat = [{"role": m.role, "content": m.content} for m in messages if m.role != "system"]
        options: dict[str, Any] = {"system": system} if system else {}
        if _accepts_temperature(client):
            options["temperature"] = temperature
        try:
            response = await client.messages.create(
                model=self.model,
                messages=chat,
                max_tokens=max_tokens or DEFAULT_MAX_TOKENS,
                **options,
            )
        except anthropic.APIStatusError as exc:
            status = int(exc.status_code)
            raise LLMCallError(
                redact(f"anthropic: HTTP {status}: {exc.message}", self.__key),
                retryable=is_retryable_status(status),
                status=status,
                retry_after=parse_retry_after(exc.response.headers),
            ) from None
        except anthropic.APITimeoutError:
            raise LLMCallError(f"anthropic: no answer within {self.timeout} s", retryable=True) from None
        except anthropic.APIConnectionError as exc:
            raise LLMCallError(redact(f"anthropic: connection failed: {exc}", self.__key), retryable=True) from None
        text = "".join(getattr(block, "text", "") for block in response.content if block.type == "text")
        usage = response.usage
        return LLMResponse(
            text=text,
            input_tokens=int(getattr(usage, "input_tokens", 0) or 0),
            output_tokens=int(getattr(usage, "output_tokens", 0) or 0),
            model=response.model,
        )

    async def aclose(self) -> None:
        client, self._client, self._loop = self._client, None, None
        if client is not None:
            await client.close()
