"""The hooks evret-llamaindex registers: the ``llamaindex`` retriever and the ``adapt_retriever`` adapter."""

from __future__ import annotations

from typing import Any

from evret_core.sdk import Register, Retriever, hookimpl, lazy


@hookimpl
def register_retrievers(register: Register[Retriever]) -> None:
    register("llamaindex", lazy("evret_llamaindex.retriever:create_llamaindex_retriever"))


@hookimpl
def adapt_retriever(obj: Any) -> Any:
    from evret_llamaindex.retriever import is_llamaindex_object

    if not is_llamaindex_object(obj):
        return None  # not ours: never import llama-index-core for a foreign object
    from llama_index.core.base.base_retriever import BaseRetriever
    from llama_index.core.indices.base import BaseIndex

    if isinstance(obj, (BaseRetriever, BaseIndex)):
        from evret_llamaindex.retriever import LlamaIndexRetriever

        return LlamaIndexRetriever(obj)
    return None
