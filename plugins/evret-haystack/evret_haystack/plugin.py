"""The hooks evret-haystack registers: the ``haystack`` retriever and the ``adapt_retriever`` adapter."""

from __future__ import annotations

from typing import Any

from evret_core.sdk import Register, Retriever, hookimpl, lazy


@hookimpl
def register_retrievers(register: Register[Retriever]) -> None:
    register("haystack", lazy("evret_haystack.retriever:create_haystack_retriever"))


@hookimpl
def adapt_retriever(obj: Any) -> Any:
    from evret_haystack.wiring import is_haystack_object

    if not is_haystack_object(obj):
        return None  # not ours: never import haystack for a foreign object
    from evret_haystack.retriever import HaystackRetriever

    return HaystackRetriever(obj)
