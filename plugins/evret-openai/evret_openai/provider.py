"""The ``openai`` provider: one chat-completion attempt per call through the SDK's async client.

The SDK's own retries are off (``max_retries=0``): Evret's :class:`~evret_core.llm.LLMClient` is the only retry
policy. The key comes from ``api_key`` or ``OPENAI_API_KEY``; the endpoint from ``base_url``, else
``OPENAI_BASE_URL`` (read by the SDK), else OpenAI's.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from typing import Any

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
from evret_openai import DEFAULT_MODEL


class OpenAIProvider(LLMProvider):
    """OpenAI (or any OpenAI-compatible endpoint) chat completions. Default model: ``gpt-4o-mini``."""

    name = "openai"
    default_model = DEFAULT_MODEL

    def __init__(
        self,
        model: str | None = None,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float | None = 60.0,
        organization: str | None = None,
    ) -> None:
        super().__init__(model)
        key = api_key or os.environ.get("OPENAI_API_KEY")
        if not key:
            raise EvretError("openai provider: no API key; pass api_key=... or set OPENAI_API_KEY")
        self.__key = key  # name-mangled and never in config() or repr()
        self.base_url = base_url
        self.timeout = timeout
        self.organization = organization
        self._client: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def __repr__(self) -> str:
        return f"OpenAIProvider(model={self.model!r}, base_url={self.base_url!r})"

    def config(self) -> dict[str, Any]:
        return {"provider": self.name, "model": self.model, "base_url": self.base_url}

    def _sdk(self) -> Any:
        # The SDK's HTTP pool belongs to one event loop; run_sync may start a new loop per batch.
        loop = asyncio.get_running_loop()
        if self._client is None or self._loop is not loop:
            from openai import AsyncOpenAI

            self._client = AsyncOpenAI(api_key=self.__key, base_url=self.base_url, timeout=self.timeout,
                                       organization=self.organization, max_retries=0)
            self._loop = loop
        return self._client

    async def acomplete(
        self,
        messages: Sequence[ChatMessage],
        *,
        temperature: float = 0.0,
        max_tokens: int | None = None,
    ) -> LLMResponse:
        import openai

        client = self._sdk()
        options: dict[str, Any] = {}
        if max_tokens is not None:
            options["max_tokens"] = max_tokens
        try:
            response = await client.chat.completions.create(
                model=self.model,
                messages=[{"role": m.role, "content": m.content} for m in messages],
                temperature=temperature,
                **options,
            )
        except openai.APIStatusError as exc:
            status = int(exc.status_code)
            raise LLMCallError(
                redact(f"openai: HTTP {status}: {exc.message}", self.__key),
                retryable=is_retryable_status(status),
                status=status,
                retry_after=parse_retry_after(exc.response.headers),
            ) from None
        except openai.APITimeoutError:
            raise LLMCallError(f"openai: no answer within {self.timeout} s", retryable=True) from None
        except openai.APIConnectionError as exc:
            raise LLMCallError(redact(f"openai: connection failed: {exc}", self.__key), retryable=True) from None
        choice = response.choices[0] if response.choices else None
        text = (choice.message.content if choice is not None else None) or ""
        usage = response.usage
        return LLMResponse(
            text=text,
            input_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
            output_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
            model=response.model,
        )

    async def aclose(self) -> None:
        client, self._client, self._loop = self._client, None, None
        if client is not None:
            await client.close()
