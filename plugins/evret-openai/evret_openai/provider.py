"""The ``openai`` provider: one chat-completion attempt per call through the SDK's async client.

The SDK's own retries are off (``max_retries=0``): Evret's :class:`~evret_core.llm.client.LLMClient` is the only retry
policy. The key comes from ``api_key`` or ``OPENAI_API_KEY``; the endpoint from ``base_url``, else
``OPENAI_BASE_URL`` (read by the SDK), else OpenAI's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from evret_core.sdk import ChatMessage, LLMResponse, SDKProvider
from evret_openai import DEFAULT_MODEL


class OpenAIProvider(SDKProvider):
    """OpenAI (or any OpenAI-compatible endpoint) chat completions. Default model: ``gpt-4o-mini``."""

    name = "openai"
    default_model = DEFAULT_MODEL
    api_key_env = ("OPENAI_API_KEY",)

    def __init__(
        self,
        model: str | None = None,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float | None = 60.0,
        organization: str | None = None,
    ) -> None:
        super().__init__(model, api_key, base_url, timeout)
        self.organization = organization

    def _make_client(self, api_key: str) -> Any:
        from openai import AsyncOpenAI

        return AsyncOpenAI(api_key=api_key, base_url=self.base_url, timeout=self.timeout,
                           organization=self.organization, max_retries=0)

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
            raise self.status_error(int(exc.status_code), exc.message, exc.response.headers) from None
        except openai.APITimeoutError:
            raise self.timeout_error() from None
        except openai.APIConnectionError as exc:
            raise self.connection_error(exc) from None
        choice = response.choices[0] if response.choices else None
        text = (choice.message.content if choice is not None else None) or ""
        usage = response.usage
        return LLMResponse(
            text=text,
            input_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
            output_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
            model=response.model,
        )
