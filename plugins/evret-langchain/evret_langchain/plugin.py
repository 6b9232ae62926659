"""The hooks evret-langchain registers: the ``langchain`` retriever and the ``adapt_retriever`` adapter."""

from __future__ import annotations

from typing import Any

from evret_core.sdk import Register, Retriever, hookimpl, lazy


@hookimpl
def register_retrievers(register: Register[Retriever]) -> None:
    register("langchain", lazy("evret_langchain.retriever:create_langchain_retriever"))


@hookimpl
def adapt_retriever(obj: Any) -> Any:
    from evret_langchain.retriever import is_langchain_object

    if not is_langchain_object(obj):
        return None  # not ours: never import langchain-core for a foreign object
    from langchain_core.retrievers import BaseRetriever
    from langchain_core.vectorstores import VectorStore

    if isinstance(obj, (BaseRetriever, VectorStore)):
        from evret_langchain.retriever import LangChainRetriever

        return LangChainRetriever(obj)
    return None
