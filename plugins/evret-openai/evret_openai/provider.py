"""The ``openai`` provider: one chat-completion attempt per call through the SDK's async client.

The SDK's own retries are off (``max_retries=0``): Evret's :class:`~evret_core.llm.client.LLMClient` is the only retry
policy. The key comes from ``api_key`` or ``OPENAI_API_KEY``; the endpoint from ``base_url``, else
``OPENAI_BASE_URL`` (read by the SDK), else OpenAI's. A structured call's schema goes as ``response_format``
``json_schema`` (:func:`response_format`), unless the ``json_schema`` option is false.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from evret_core.sdk import ChatMessage, EvretError, LLMResponse, SDKProvider
from evret_openai import DEFAULT_MODEL

# the name the schema goes by in response_format (the API requires one: letters, digits, _ and -)
SCHEMA_NAME = "answer"
# keywords OpenAI's strict mode refuses, or that its SDK rewrites before sending a strict schema
_NOT_STRICT = ("allOf", "oneOf", "not", "if", "then", "else", "patternProperties", "unevaluatedProperties")


def strict_compatible(schema: Mapping[str, Any]) -> bool:
    """Whether OpenAI's strict mode takes ``schema`` as it is: an object at the root, and everywhere (``$defs``
    included) every object closed (``additionalProperties: false``) with every property required, no ``$ref``
    beside other keywords and none of :data:`_NOT_STRICT`. A pydantic model with ``extra="forbid"`` and no
    defaults gives such a schema."""
    return _is_object(schema) and _strict(schema)


def _is_object(node: Mapping[str, Any]) -> bool:
    kind = node.get("type")
    return kind == "object" or (isinstance(kind, list) and "object" in kind) or "properties" in node


def _strict(node: Any) -> bool:
    if isinstance(node, list):
        return all(_strict(item) for item in node)
    if not isinstance(node, Mapping):
        return False  # a boolean subschema (anything, or nothing) has no strict form
    if ("$ref" in node and len(node) > 1) or any(key in node for key in _NOT_STRICT):
        return False
    if _is_object(node):
        properties = node.get("properties") or {}
        if node.get("additionalProperties") is not False or not isinstance(properties, Mapping):
            return False
        if sorted(node.get("required") or []) != sorted(properties):
            return False
    for key in ("properties", "$defs", "definitions"):
        children = node.get(key)
        if children is not None and not (isinstance(children, Mapping) and _strict(list(children.values()))):
            return False
    return all(_strict(node[key]) for key in ("items", "prefixItems", "anyOf") if key in node)


def response_format(schema: Mapping[str, Any]) -> dict[str, Any]:
    """The ``response_format`` that asks for JSON matching ``schema``: ``strict`` when
    :func:`strict_compatible` (the API then guarantees the match), else a schema the model is asked to follow."""
    return {"type": "json_schema",
            "json_schema": {"name": SCHEMA_NAME, "schema": schema, "strict": strict_compatible(schema)}}


class OpenAIProvider(SDKProvider):
    """OpenAI (or any OpenAI-compatible endpoint) chat completions. Default model: ``gpt-4o-mini``.

    ``json_schema`` (default True) sends a structured call's schema as ``response_format``; False leaves it in
    the system message only, for a compatible server that rejects ``response_format``.
    """

    name = "openai"
    default_model = DEFAULT_MODEL
    api_key_env = ("OPENAI_API_KEY",)
    constrains_json = True

    def __init__(
        self,
        model: str | None = None,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float | None = 60.0,
        organization: str | None = None,
        json_schema: bool = True,
    ) -> None:
        if not isinstance(json_schema, bool):
            raise EvretError(f"openai provider: option 'json_schema' must be true or false, got {json_schema!r}")
        super().__init__(model, api_key, base_url, timeout)
        self.organization = organization
        self.constrains_json = json_schema  # False: LLMClient then gives the schema in the prompt only

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
        json_schema: Mapping[str, Any] | None = None,
    ) -> LLMResponse:
        import openai

        client = self._sdk()
        options: dict[str, Any] = {}
        if max_tokens is not None:
            options["max_tokens"] = max_tokens
        if json_schema is not None:
            options["response_format"] = response_format(json_schema)
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
        if not text and json_schema is not None and choice is not None:
            # a model that declines a structured request says why in `refusal`: shown in the repair turn
            text = getattr(choice.message, "refusal", None) or ""
        usage = response.usage
        return LLMResponse(
            text=text,
            input_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
            output_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
            model=response.model,
        )
