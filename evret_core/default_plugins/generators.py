"""Built-in generators: extractive (deterministic, offline)."""

from __future__ import annotations

from evret_core.hookspecs import Register, hookimpl


@hookimpl
def register_generators(register: Register) -> None:
    from evret_core.rag.extractive import ExtractiveGenerator

    register("extractive", ExtractiveGenerator)
