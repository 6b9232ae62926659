"""Hook adapt_retriever: firstresult; a plugin that does not know the object answers None and others are asked."""

from __future__ import annotations

from typing import Any

from evret_core import RetrievalResult, hookimpl
from evret_core.plugins.loading import register_plugin
from evret_core.retrieve.retrievers import resolve_retriever


class Thing:
    pass


class Adapted:
    def retrieve(self, query: str, k: int) -> list[RetrievalResult]:
        return []

    def batch_retrieve(self, queries: list[str], k: int) -> list[list[RetrievalResult]]:
        return [[] for _ in queries]


class Knows:
    @hookimpl
    def adapt_retriever(self, obj: Any) -> Any:
        return Adapted() if isinstance(obj, Thing) else None


class DoesNotKnow:
    calls = 0

    @hookimpl
    def adapt_retriever(self, obj: Any) -> Any:
        DoesNotKnow.calls += 1
        return None


def test_adapt_retriever() -> None:
    register_plugin(Knows(), name="knows")
    register_plugin(DoesNotKnow(), name="does-not-know")
    assert isinstance(resolve_retriever(Thing()), Adapted)
    assert DoesNotKnow.calls == 1  # registered last, asked first by pluggy, answered None
    plain = resolve_retriever(lambda q, k: [])
    assert type(plain).__name__ == "CallableRetriever"
