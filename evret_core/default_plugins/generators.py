"""Built-in generators: extractive (deterministic, offline) and llm (any registered LLM provider)."""

from __future__ import annotations

from evret_core.hookspecs import Register, hookimpl


@hookimpl
def register_generators(register: Register) -> None:
    from evret_core.rag.extractive import ExtractiveGenerator
    from evret_core.rag.llm_generator import LLMGenerator

    register("extractive", ExtractiveGenerator)
    register("llm", LLMGenerator)
