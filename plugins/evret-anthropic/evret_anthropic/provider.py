"""The ``anthropic`` provider: one Messages API attempt per call through the SDK's async client.

The SDK's own retries are off (``max_retries=0``): Evret's :class:`~evret_core.llm.client.LLMClient` is the only retry
policy. The key comes from ``api_key`` or ``ANTHROPIC_API_KEY``; the endpoint from ``base_url``, else
``ANTHROPIC_BASE_URL`` (read by the SDK), else Anthropic's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from evret_anthropic import DEFAULT_MODEL
from evret_core.sdk import ChatMessage, LLMResponse, SDKProvider

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


class AnthropicProvider(SDKProvider):
    """Claude through the Messages API. Default model: ``claude-haiku-4-5``."""

    name = "anthropic"
    default_model = DEFAULT_MODEL
    api_key_env = ("ANTHROPIC_API_KEY",)

    def _make_client(self, api_key: str) -> Any:
        from anthropic import AsyncAnthropic

        return AsyncAnthropic(api_key=api_key, base_url=self.base_url, timeout=self.timeout, max_retries=0)

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
            raise self.status_error(int(exc.status_code), exc.message, exc.response.headers) from None
        except anthropic.APITimeoutError:
            raise self.timeout_error() from None
        except anthropic.APIConnectionError as exc:
            raise self.connection_error(exc) from None
        text = "".join(getattr(block, "text", "") for block in response.content if block.type == "text")
        usage = response.usage
        return LLMResponse(
            text=text,
            input_tokens=int(getattr(usage, "input_tokens", 0) or 0),
            output_tokens=int(getattr(usage, "output_tokens", 0) or 0),
            model=response.model,
        )
