"""``structured_call``: ask for JSON matching a pydantic schema, validate it, and send the validation error back.

The answer is parsed (the whole text, a fenced block, or the outermost ``{...}``) and validated against the
schema and an optional ``check``. When it does not validate, the answer goes back to the model with the error,
up to ``repairs`` times; after that the item is *unmeasured*: :attr:`Structured.unmeasured` says why, and no
guess replaces it. A call that fails after the client's retries is unmeasured too; a fatal one (bad key, unknown
model) stops the run. Usable answers are committed to the client's cache as they arrive. A provider that takes
the schema (:attr:`~evret_core.contracts.provider.LLMProvider.constrains_json`: ``openai``, ``anthropic``,
``google``, ``transformers``) is also given the schema itself, for its API's structured output or its constrained
decoding; its answers are validated and repaired all the same.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ValidationError

from evret_core.contracts.provider import ChatMessage, LLMCallError, LLMResponse
from evret_core.llm.cache import cache_key
from evret_core.llm.client import LLMClient, LLMUsage

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)

DEFAULT_REPAIRS = 2
# Part of every structured cache key: bump it when the protocol changes, so old answers are not reused.
PROMPT_VERSION = 2


class AnswerError(ValueError):
    """The model's answer cannot be used; the message is sent back to the model verbatim."""


@dataclass
class Structured(Generic[T]):
    """A structured call's result: :attr:`value` when measured, else :attr:`unmeasured` says why not.

    ``usage`` is what this call cost (a cache hit costs nothing), ``tries`` the answers asked for (0 on a cache
    hit) and ``answers`` their raw texts.
    """

    value: T | None
    unmeasured: str | None = None
    usage: LLMUsage = field(default_factory=LLMUsage)
    tries: int = 0
    answers: list[str] = field(default_factory=list)
    cached: bool = False
    #: the failed call's error when the item is unmeasured because a call failed (its ``label`` counts it)
    error: LLMCallError | None = None

    @property
    def measured(self) -> bool:
        return self.value is not None


async def structured_call(
    client: LLMClient,
    *,
    system: str,
    prompt: str,
    schema: type[M],
    repairs: int = DEFAULT_REPAIRS,
    cache_key_extra: Mapping[str, Any] | None = None,
    check: Callable[[M], M] | None = None,
    temperature: float | None = None,
    max_tokens: int | None = None,
) -> Structured[M]:
    """Ask for a JSON object matching ``schema``; the validated value, or an unmeasured marker with the reason.

    :param client: the :class:`LLMClient` (its policy, usage and cache apply).
    :param system: the system message (the schema is appended to it); :param prompt: the user message.
    :param schema: the pydantic model the answer must validate as.
    :param repairs: how many times an invalid answer is sent back with its error (``repairs + 1`` answers).
    :param cache_key_extra: what identifies the question besides the provider, temperature and schema (give
        the un-fenced inputs when the prompt holds a random fence code); None keys on ``system`` and ``prompt``.
    :param check: further validation of the value; raises :class:`AnswerError` (sent back like a schema error).
    :param temperature: overrides the client's settings for this call.
    """
    temperature = client.temperature if temperature is None else float(temperature)
    key = structured_key(client, system=system, prompt=prompt, schema=schema, cache_key_extra=cache_key_extra,
                         temperature=temperature, max_tokens=max_tokens) if client.cache is not None else None
    system = _with_schema(system, schema)

    def validate(text: str) -> M:
        value = parse_model(text, schema)
        return check(value) if check is not None else value

    if key is not None:
        hit = client.cached(key)
        if hit is not None:
            try:
                return Structured(validate(hit), answers=[hit], cached=True)
            except AnswerError:
                pass  # an answer this version no longer accepts: ask again
    conversation = [ChatMessage("system", system), ChatMessage("user", prompt)]
    usage = LLMUsage()
    answers: list[str] = []
    last_error = "no answer"
    for tries in range(1, repairs + 2):
        response = await client.attempt(conversation, temperature=temperature, max_tokens=max_tokens,
                                         json_schema=_schema_dict(schema))
        usage.calls += 1
        if not isinstance(response, LLMResponse):
            usage.failed += 1
            return Structured(None, f"LLM call failed: {response}", usage, tries, answers, error=response)
        usage.succeeded += 1
        usage.add(response)
        answers.append(response.text)
        try:
            value = validate(response.text)
        except AnswerError as exc:
            last_error = str(exc)
        else:
            if key is not None:  # committed at once: a killed run keeps every usable answer it paid for
                client.store(key, response)
            return Structured(value, None, usage, tries, answers)
        conversation += [
            ChatMessage("assistant", response.text),
            ChatMessage("user", f"Your answer could not be used: {last_error}\n"
                                "Answer again, with only the JSON object in the required format."),
        ]
    return Structured(None, f"no usable answer after {repairs + 1} tries; last error: {last_error}", usage,
                      repairs + 1, answers)


def structured_key(
    client: LLMClient,
    *,
    system: str,
    prompt: str,
    schema: type[BaseModel],
    cache_key_extra: Mapping[str, Any] | None = None,
    temperature: float | None = None,
    max_tokens: int | None = None,
) -> str:
    """The cache key :func:`structured_call` files this call's answer under (same arguments), so that a
    ``--dry-run`` can count what is cached without calling anything."""
    temperature = client.temperature if temperature is None else float(temperature)
    parts: dict[str, Any] = {"kind": "structured", "label": client.label, "provider": client.provider.config(),
                             "temperature": temperature, "version": PROMPT_VERSION,
                             "schema": _schema_text(schema), "max_tokens": max_tokens}
    parts["extra" if cache_key_extra is not None else "messages"] = (
        dict(cache_key_extra) if cache_key_extra is not None else [_with_schema(system, schema), prompt])
    return cache_key(parts)


def _with_schema(system: str, schema: type[BaseModel]) -> str:
    return f"{system}\n\nAnswer with only a JSON object that matches this JSON schema: {_schema_text(schema)}"


@lru_cache(maxsize=128)
def _schema_dict(schema: type[BaseModel]) -> dict[str, Any]:
    """The JSON Schema that providers which take one get (a shared object: never changed)."""
    return schema.model_json_schema()


@lru_cache(maxsize=128)
def _schema_text(schema: type[BaseModel]) -> str:
    return json.dumps(schema.model_json_schema(), sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def parse_model(text: str, model: type[M]) -> M:
    """The JSON object in a model's answer (:func:`parse_json_object`) validated as ``model``; an
    :class:`AnswerError` naming every field that is missing or wrong."""
    data = parse_json_object(text)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'answer'}: "
                             f"{str(e['msg']).removeprefix('Value error, ')}" for e in exc.errors())
        raise AnswerError(f"the JSON does not have the required fields ({problems})") from None


_CODE_BLOCK = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.DOTALL)


def parse_json_object(text: str) -> dict[str, Any]:
    """The JSON object in a model's answer: the whole text, a fenced block, or the outermost ``{...}``."""
    candidates = [text.strip()]
    candidates += [m.group(1).strip() for m in _CODE_BLOCK.finditer(text)]
    start, end = text.find("{"), text.rfind("}")
    if 0 <= start < end:
        candidates.append(text[start:end + 1])
    first_error: str | None = None
    for candidate in candidates:
        try:
            value = json.loads(candidate)
        except (json.JSONDecodeError, RecursionError) as exc:
            first_error = first_error or f"invalid JSON ({exc})"
            continue
        if isinstance(value, dict):
            return value
        first_error = first_error or f"expected a JSON object, got {type(value).__name__}"
    raise AnswerError(first_error or "the answer contains no JSON object")


def answer_int(value: object, field: str, low: int, high: int) -> int:
    """A model's integer answer field checked for a pydantic ``mode="before"`` validator: an int (or an integral
    float, as JSON may write it) from ``low`` to ``high``; a bool, another type or a value out of range is a
    ``ValueError`` naming the field, so :func:`structured_call` sends it back for repair."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(f"'{field}' must be an integer from {low} to {high}, got {value!r}")
    return value
