"""The hooks evret-chroma registers: the ``chroma`` retriever."""

from __future__ import annotations

from evret_core.default_plugins import LazyFactory  # the retriever module imports numpy and pydantic
from evret_core.hookspecs import Register, hookimpl


@hookimpl
def register_retrievers(register: Register) -> None:
    register("chroma", LazyFactory("evret_chroma.retriever:ChromaRetriever"))
