"""The hooks evret-qdrant registers: the ``qdrant`` retriever."""

from __future__ import annotations

from evret_core.sdk import Register, hookimpl, lazy


@hookimpl
def register_retrievers(register: Register) -> None:
    register("qdrant", lazy("evret_qdrant.retriever:QdrantRetriever"))
