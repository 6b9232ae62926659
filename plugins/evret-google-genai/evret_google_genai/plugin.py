"""Entry point of evret-google-genai: registers the ``google`` LLM provider (no SDK import at load time)."""

from __future__ import annotations

from evret_core.sdk import LLMProvider, Register, hookimpl, lazy
from evret_google_genai import DEFAULT_MODEL


@hookimpl
def register_llm_providers(register: Register[LLMProvider]) -> None:
    register("google", lazy("evret_google_genai.provider:GoogleProvider", default_model=DEFAULT_MODEL))
