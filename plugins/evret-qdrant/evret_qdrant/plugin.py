"""The hooks evret-qdrant registers: the ``qdrant`` retriever."""

from __future__ import annotations

from evret_core.sdk import Register, Retriever, hookimpl, lazy


@hookimpl
def register_retrievers(register: Register[Retriever]) -> None:
    register("qdrant", lazy("evret_qdrant.retriever:QdrantRetriever"))
