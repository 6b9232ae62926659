"""Entry point of evret-google-genai: registers the ``google`` LLM provider (no SDK import at load time)."""

from __future__ import annotations

from typing import Any

from evret_core.hookspecs import Register, hookimpl
from evret_google_genai import DEFAULT_MODEL


def _google_provider(**options: Any) -> Any:
    from evret_google_genai.provider import GoogleProvider

    return GoogleProvider(**options)


_google_provider.default_model = DEFAULT_MODEL  # type: ignore[attr-defined]


@hookimpl
def register_llm_providers(register: Register) -> None:
    register("google", _google_provider)
