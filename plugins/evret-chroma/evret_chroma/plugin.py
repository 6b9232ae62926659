"""The hooks evret-chroma registers: the ``chroma`` retriever."""

from __future__ import annotations

from evret_core.sdk import Register, Retriever, hookimpl, lazy


@hookimpl
def register_retrievers(register: Register[Retriever]) -> None:
    register("chroma", lazy("evret_chroma.retriever:ChromaRetriever"))
