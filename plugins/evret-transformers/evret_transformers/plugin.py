"""Entry point of evret-transformers: registers the ``transformers`` LLM provider (no torch import at load time)."""

from __future__ import annotations

from evret_core.sdk import LLMProvider, Register, hookimpl, lazy
from evret_transformers import DEFAULT_MODEL


@hookimpl
def register_llm_providers(register: Register[LLMProvider]) -> None:
    register("transformers", lazy("evret_transformers.provider:TransformersProvider", default_model=DEFAULT_MODEL))
