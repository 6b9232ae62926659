"""The hooks evret-qdrant registers: the ``qdrant`` retriever."""

from __future__ import annotations

from evret_core.hookspecs import Register, hookimpl


@hookimpl
def register_retrievers(register: Register) -> None:
    from evret_qdrant.retriever import QdrantRetriever

    register("qdrant", QdrantRetriever)
