"""The hooks evret-pgvector registers: the ``pgvector`` retriever."""

from __future__ import annotations

from evret_core.default_plugins import LazyFactory  # the retriever module imports numpy and pydantic
from evret_core.hookspecs import Register, hookimpl


@hookimpl
def register_retrievers(register: Register) -> None:
    register("pgvector", LazyFactory("evret_pgvector.retriever:PgVectorRetriever"))
