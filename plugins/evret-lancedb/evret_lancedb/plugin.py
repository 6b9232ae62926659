"""The hooks evret-lancedb registers: the ``lancedb`` retriever."""

from __future__ import annotations

from evret_core.sdk import Register, Retriever, hookimpl, lazy


@hookimpl
def register_retrievers(register: Register[Retriever]) -> None:
    register("lancedb", lazy("evret_lancedb.retriever:LanceDBRetriever"))
