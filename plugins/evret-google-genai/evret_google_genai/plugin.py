"""Entry point of evret-google-genai: registers the ``google`` LLM provider (no SDK import at load time)."""

from __future__ import annotations

from typing import Any

from evret_core.hookspecs import Register, hookimpl


def _google_provider(**options: Any) -> Any:
    from evret_google_genai.provider import GoogleProvider

    return GoogleProvider(**options)


@hookimpl
def register_llm_providers(register: Register) -> None:
    register("google", _google_provider)
