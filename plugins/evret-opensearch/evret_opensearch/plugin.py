"""The hooks evret-opensearch registers: the ``opensearch`` retriever."""

from __future__ import annotations

from evret_core.sdk import Register, Retriever, hookimpl, lazy


@hookimpl
def register_retrievers(register: Register[Retriever]) -> None:
    register("opensearch", lazy("evret_opensearch.retriever:OpenSearchRetriever"))
