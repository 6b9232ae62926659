"""The hooks evret-pgvector registers: the ``pgvector`` retriever."""

from __future__ import annotations

from evret_core.hookspecs import Register, hookimpl


@hookimpl
def register_retrievers(register: Register) -> None:
    from evret_pgvector.retriever import PgVectorRetriever

    register("pgvector", PgVectorRetriever)
