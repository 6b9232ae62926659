"""The hooks evret-pgvector registers: the ``pgvector`` retriever."""

from __future__ import annotations

from evret_core.sdk import Register, Retriever, hookimpl, lazy


@hookimpl
def register_retrievers(register: Register[Retriever]) -> None:
    register("pgvector", lazy("evret_pgvector.retriever:PgVectorRetriever"))
