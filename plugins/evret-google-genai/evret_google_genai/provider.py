"""The ``google`` provider: one Gemini generateContent attempt per call through google-genai's async client.

google-genai retries through tenacity when ``HttpOptions.retry_options`` asks for it, and on its own after some
connection errors unless ``retry_options`` is set; this provider sets ``retry_options`` to a single attempt, so
Evret's :class:`~evret_core.llm.client.LLMClient` is the only retry policy. The key comes from ``api_key``, else
``GEMINI_API_KEY``, else ``GOOGLE_API_KEY``; the endpoint from ``base_url``, else ``GOOGLE_GEMINI_BASE_URL``,
else Google's. A structured call's schema goes as ``response_json_schema``, with ``response_mime_type``
``application/json``.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping, Sequence
from typing import Any

from evret_core.sdk import ChatMessage, LLMResponse, SDKProvider
from evret_google_genai import DEFAULT_MODEL

_TIMEOUT_NAMES = ("Timeout", "TimeoutException", "ReadTimeout", "ConnectTimeout", "PoolTimeout", "WriteTimeout")


class GoogleProvider(SDKProvider):
    """Gemini through the Gemini Developer API. Default model: ``gemini-2.5-flash``."""

    name = "google"
    default_model = DEFAULT_MODEL
    api_key_env = ("GEMINI_API_KEY", "GOOGLE_API_KEY")
    constrains_json = True

    def __init__(
        self,
        model: str | None = None,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float | None = 60.0,
    ) -> None:
        super().__init__(model, api_key, base_url or os.environ.get("GOOGLE_GEMINI_BASE_URL") or None, timeout)

    def _make_client(self, api_key: str) -> Any:
        from google import genai
        from google.genai import types

        options = types.HttpOptions(
            base_url=self.base_url,
            timeout=None if self.timeout is None else int(self.timeout * 1000),  # milliseconds
            retry_options=types.HttpRetryOptions(attempts=1),
        )
        return genai.Client(api_key=api_key, http_options=options)

    async def _close_client(self, client: Any) -> None:
        aclose = getattr(getattr(client, "aio", None), "aclose", None)
        if aclose is not None:
            await aclose()

    async def acomplete(
        self,
        messages: Sequence[ChatMessage],
        *,
        temperature: float = 0.0,
        max_tokens: int | None = None,
        json_schema: Mapping[str, Any] | None = None,
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
            # JSON Schema as it is (response_schema would take Google's own Schema subset instead)
            response_mime_type=None if json_schema is None else "application/json",
            response_json_schema=None if json_schema is None else json_schema,
        )
        try:
            response = await client.aio.models.generate_content(model=self.model, contents=contents, config=config)
        except errors.APIError as exc:
            headers = getattr(getattr(exc, "response", None), "headers", None)
            raise self.status_error(int(exc.code or 0) or None, exc.message or exc.status, headers) from None
        except (asyncio.TimeoutError, TimeoutError):
            raise self.timeout_error() from None
        except Exception as exc:
            # The transport (httpx or aiohttp) raises its own classes; both name timeouts and connection errors
            # recognisably, and both are worth another attempt.
            kind = type(exc).__name__
            module = type(exc).__module__
            if kind in _TIMEOUT_NAMES:
                raise self.timeout_error() from None
            if module.startswith(("httpx", "httpcore", "aiohttp")) or isinstance(exc, OSError):
                raise self.connection_error(f"{kind}: {exc}") from None
            raise
        text = response.text or ""
        usage = response.usage_metadata
        return LLMResponse(
            text=text,
            input_tokens=int(getattr(usage, "prompt_token_count", 0) or 0),
            output_tokens=int(getattr(usage, "candidates_token_count", 0) or 0),
            model=getattr(response, "model_version", None) or self.model,
        )
