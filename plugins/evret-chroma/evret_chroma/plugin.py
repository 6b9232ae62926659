"""The hooks evret-chroma registers: the ``chroma`` retriever."""

from __future__ import annotations

from evret_core.hookspecs import Register, hookimpl


@hookimpl
def register_retrievers(register: Register) -> None:
    from evret_chroma.retriever import ChromaRetriever

    register("chroma", ChromaRetriever)
