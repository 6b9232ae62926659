"""Built-in generators: extractive (deterministic, offline) and llm (any registered LLM provider)."""

from __future__ import annotations

from evret_core.default_plugins import LazyFactory
from evret_core.hookspecs import Register, hookimpl


@hookimpl
def register_generators(register: Register) -> None:
    register("extractive", LazyFactory("evret_core.rag.extractive:ExtractiveGenerator"))
    register("llm", LazyFactory("evret_core.rag.llm_generator:LLMGenerator"))
