"""The hooks evret-pgvector registers: the ``pgvector`` retriever."""

from __future__ import annotations

from evret_core.sdk import Register, hookimpl, lazy


@hookimpl
def register_retrievers(register: Register) -> None:
    register("pgvector", lazy("evret_pgvector.retriever:PgVectorRetriever"))
