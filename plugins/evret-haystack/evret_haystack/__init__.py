"""Evret plugin for Haystack: evaluate a retriever component or a whole ``Pipeline`` where it lives."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from evret_haystack.retriever import HaystackRetriever


def __getattr__(name: str) -> Any:
    # keeps `import evret_haystack` light: haystack-ai loads only when the adapter is used
    if name in ("HaystackRetriever", "create_haystack_retriever"):
        from evret_haystack import retriever

        return getattr(retriever, name)
    raise AttributeError(name)


__all__ = ["HaystackRetriever", "create_haystack_retriever"]
