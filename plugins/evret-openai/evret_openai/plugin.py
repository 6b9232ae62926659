"""Entry point of evret-openai: registers the ``openai`` LLM provider (no SDK import at load time)."""

from __future__ import annotations

from typing import Any

from evret_core.hookspecs import Register, hookimpl
from evret_openai import DEFAULT_MODEL


def _openai_provider(**options: Any) -> Any:
    from evret_openai.provider import OpenAIProvider

    return OpenAIProvider(**options)


_openai_provider.default_model = DEFAULT_MODEL  # type: ignore[attr-defined]


@hookimpl
def register_llm_providers(register: Register) -> None:
    register("openai", _openai_provider)
