"""Entry point of evret-anthropic: registers the ``anthropic`` LLM provider (no SDK import at load time)."""

from __future__ import annotations

from typing import Any

from evret_anthropic import DEFAULT_MODEL
from evret_core.hookspecs import Register, hookimpl


def _anthropic_provider(**options: Any) -> Any:
    from evret_anthropic.provider import AnthropicProvider

    return AnthropicProvider(**options)


_anthropic_provider.default_model = DEFAULT_MODEL  # type: ignore[attr-defined]


@hookimpl
def register_llm_providers(register: Register) -> None:
    register("anthropic", _anthropic_provider)
