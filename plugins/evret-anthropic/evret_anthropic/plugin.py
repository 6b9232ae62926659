"""Entry point of evret-anthropic: registers the ``anthropic`` LLM provider (no SDK import at load time)."""

from __future__ import annotations

from evret_anthropic import DEFAULT_MODEL
from evret_core.sdk import LLMProvider, Register, hookimpl, lazy


@hookimpl
def register_llm_providers(register: Register[LLMProvider]) -> None:
    register("anthropic", lazy("evret_anthropic.provider:AnthropicProvider", default_model=DEFAULT_MODEL))
