"""The hooks evret-milvus registers: the ``milvus`` retriever."""

from __future__ import annotations

from evret_core.sdk import Register, Retriever, hookimpl, lazy


@hookimpl
def register_retrievers(register: Register[Retriever]) -> None:
    register("milvus", lazy("evret_milvus.retriever:MilvusRetriever"))
