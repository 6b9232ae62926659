"""Entry point of evret-openai: registers the ``openai`` LLM provider (no SDK import at load time)."""

from __future__ import annotations

from evret_core.sdk import LLMProvider, Register, hookimpl, lazy
from evret_openai import DEFAULT_MODEL


@hookimpl
def register_llm_providers(register: Register[LLMProvider]) -> None:
    register("openai", lazy("evret_openai.provider:OpenAIProvider", default_model=DEFAULT_MODEL))
