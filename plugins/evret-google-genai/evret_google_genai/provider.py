"""The ``google`` provider: one Gemini generateContent attempt per call through google-genai's async client.

google-genai retries through tenacity when ``HttpOptions.retry_options`` asks for it, and on its own after some
connection errors unless ``retry_options`` is set; this provider sets ``retry_options`` to a single attempt, so
Evret's :class:`~evret_core.llm.LLMClient` is the only retry policy. The key comes from ``api_key``, else
``GEMINI_API_KEY``, else ``GOOGLE_API_KEY``; the endpoint from ``base_url``, else ``GOOGLE_GEMINI_BASE_URL``,
else Google's.
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
from evret_google_genai import DEFAULT_MODEL

_TIMEOUT_NAMES = ("Timeout", "TimeoutException", "ReadTimeout", "ConnectTimeout", "PoolTimeout", "WriteTimeout")


class GoogleProvider(LLMProvider):
    """Gemini through the Gemini Developer API. Default model: ``gemini-2.5-flash``."""

    name = "google"
    default_model = DEFAULT_MODEL

    def __init__(
        self,
        model: str | None = None,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float | None = 60.0,
    ) -> None:
        super().__init__(model)
        key = api_key or os.environ.get("GEMINI_API_KEY") or os.environ.get("GOOGLE_API_KEY")
        if not key:
            raise EvretError("google provider: no API key; pass api_key=... or set GEMINI_API_KEY or GOOGLE_API_KEY")
        self.__key = key  # name-mangled and never in config() or repr()
        self.base_url = base_url or os.environ.get("GOOGLE_GEMINI_BASE_URL") or None
        self.timeout = timeout
        self._client: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def __repr__(self) -> str:
        return f"GoogleProvider(model={self.model!r}, base_url={self.base_url!r})"

    def config(self) -> dict[str, Any]:
        return {"provider": self.name, "model": self.model, "base_url": self.base_url}

    def _sdk(self) -> Any:
        # The SDK's HTTP pool belongs to one event loop; run_sync may start a new loop per batch.
        loop = asyncio.get_running_loop()
        if self._client is None or self._loop is not loop:
            from google import genai
            from google.genai import types

            options = types.HttpOptions(
                base_url=self.base_url,
                timeout=None if self.timeout is None else int(self.timeout * 1000),  # milliseconds
                retry_options=types.HttpRetryOptions(attempts=1),
            )
            self._client = genai.Client(api_key=self.__key, http_options=options)
            self._loop = loop
        return self._client

    async def acomplete(
        self,
        messages: Sequence[ChatMessage],
        *,
        temperature: float = 0.0,
        max_tokens: int | None = None,
    ) -> LLMResponse:
        from google.genai import errors, types

        client = self._sdk()
        system = "\n\n".join(m.content for m in messages if m.role == "system")
        contents = [
            types.Content(role="model" if m.role == "assistant" else "user", parts=[types.Part(text=m.content)])
            for m in messages
            if m.role != "system"
        ]
        config = types.GenerateContentConfig(
            system_instruction=system or None,
            temperature=temperature,
            max_output_tokens=max_tokens,
        )
        try:
            response = await client.aio.models.generate_content(model=self.model, contents=contents, config=config)
        except errors.APIError as exc:
            status = int(exc.code or 0) or None
            headers = getattr(getattr(exc, "response", None), "headers", None)
            raise LLMCallError(
                redact(f"google: HTTP {status}: {exc.message or exc.status}", self.__key),
                retryable=is_retryable_status(status),
                status=status,
                retry_after=parse_retry_after(headers),
            ) from None
        except (asyncio.TimeoutError, TimeoutError):
            raise LLMCallError(f"google: no answer within {self.timeout} s", retryable=True) from None
        except Exception as exc:
            # The transport (httpx or aiohttp) raises its own classes; both name timeouts and connection errors
            # recognisably, and both are worth another attempt.
            kind = type(exc).__name__
            module = type(exc).__module__
            if kind in _TIMEOUT_NAMES:
                raise LLMCallError(f"google: no answer within {self.timeout} s", retryable=True) from None
            if module.startswith(("httpx", "httpcore", "aiohttp")) or isinstance(exc, OSError):
                raise LLMCallError(redact(f"google: connection failed: {kind}: {exc}", self.__key),
                                   retryable=True) from None
            raise
        text = response.text or ""
        usage = response.usage_metadata
        return LLMResponse(
            text=text,
            input_tokens=int(getattr(usage, "prompt_token_count", 0) or 0),
            output_tokens=int(getattr(usage, "candidates_token_count", 0) or 0),
            model=getattr(response, "model_version", None) or self.model,
        )

    async def aclose(self) -> None:
        client, self._client, self._loop = self._client, None, None
        if client is not None:
            aclose = getattr(getattr(client, "aio", None), "aclose", None)
            if aclose is not None:
                await aclose()
