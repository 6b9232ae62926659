"""The ``anthropic`` provider: one Messages API attempt per call through the SDK's async client.

The SDK's own retries are off (``max_retries=0``): Evret's :class:`~evret_core.llm.client.LLMClient` is the only retry
policy. The key comes from ``api_key`` or ``ANTHROPIC_API_KEY``; the endpoint from ``base_url``, else
``ANTHROPIC_BASE_URL`` (read by the SDK), else Anthropic's. A structured call's schema becomes the input schema of
one tool the model must call (:func:`answer_tool`); the call's input, re-serialised as JSON, is the answer text.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from evret_anthropic import DEFAULT_MODEL
from evret_core.sdk import ChatMessage, LLMResponse, SDKProvider

# The Messages API requires max_tokens; a judge's answer is one word, but leave room for a short sentence.
DEFAULT_MAX_TOKENS = 64


# the tool a structured call's answer goes through
TOOL_NAME = "answer"


def answer_tool(schema: Mapping[str, Any]) -> dict[str, Any]:
    """The ``tools`` and ``tool_choice`` options that make the model answer with a JSON object matching
    ``schema``: one tool ``answer`` whose ``input_schema`` is the schema, and a ``tool_choice`` forcing it."""
    tool = {"name": TOOL_NAME, "description": "Give your answer as this tool's input.", "input_schema": schema}
    return {"tools": [tool], "tool_choice": {"type": "tool", "name": TOOL_NAME}}


def _answer_text(content: Sequence[Any], structured: bool) -> str:
    """A structured call's answer is the ``answer`` tool's input as JSON text (what the validator reads); else,
    and when no such block came (a proxy that ignores tools), the text blocks."""
    if structured:
        for block in content:
            if block.type == "tool_use" and block.name == TOOL_NAME:
                return json.dumps(block.input, ensure_ascii=False)
    return "".join(getattr(block, "text", "") for block in content if block.type == "text")


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
    constrains_json = True

    def _make_client(self, api_key: str) -> Any:
        from anthropic import AsyncAnthropic

        return AsyncAnthropic(api_key=api_key, base_url=self.base_url, timeout=self.timeout, max_retries=0)

    async def acomplete(
        self,
        messages: Sequence[ChatMessage],
        *,
        temperature: float = 0.0,
        max_tokens: int | None = None,
        json_schema: Mapping[str, Any] | None = None,
    ) -> LLMResponse:
        import anthropic

        client = self._sdk()
        system = "\n\n".join(m.content for m in messages if m.role == "system")
        chat = [{"role": m.role, "content": m.content} for m in messages if m.role != "system"]
        options: dict[str, Any] = {"system": system} if system else {}
        if _accepts_temperature(client):
            options["temperature"] = temperature
        if json_schema is not None:
            options.update(answer_tool(json_schema))
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
        text = _answer_text(response.content, json_schema is not None)
        usage = response.usage
        return LLMResponse(
            text=text,
            input_tokens=int(getattr(usage, "input_tokens", 0) or 0),
            output_tokens=int(getattr(usage, "output_tokens", 0) or 0),
            model=response.model,
        )
