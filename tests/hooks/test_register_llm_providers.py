"""Hook register_llm_providers: a provider is created by name with model/api_key options and answers."""

from __future__ import annotations

import asyncio
from typing import Any

from evret_core import create_llm_provider, hookimpl
from evret_core.contracts.provider import LLMProvider, LLMResponse
from evret_core.plugins.loading import register_plugin


class Upper(LLMProvider):
    name = "upper"
    default_model = "upper-1"

    def __init__(self, model: str | None = None, api_key: str | None = None) -> None:
        super().__init__(model)
        self.api_key = api_key

    async def acomplete(self, messages: Any, *, temperature: float = 0.0, max_tokens: int | None = None) -> LLMResponse:
        return LLMResponse(text=messages[-1]["content"].upper(), input_tokens=1, output_tokens=1)


class Plugin:
    @hookimpl
    def register_llm_providers(self, register):  # type: ignore[no-untyped-def]
        register("upper", Upper)


def test_register_llm_providers() -> None:
    register_plugin(Plugin(), name="p")
    provider = create_llm_provider("upper", api_key="k")
    assert provider.config() == {"provider": "upper", "model": "upper-1"}
    assert asyncio.run(provider.acomplete([{"role": "user", "content": "yes"}])).text == "YES"
