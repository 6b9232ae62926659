"""Recipes: how a part was built (a kind, a registered name and options, or the object itself), so that an executor
can build the same part again in another process.

One format serves every part an executor rebuilds on its workers: the retrieval evaluator's judge and retriever,
and the RAG harness's generator, claim judge and answer relevance. A :class:`Recipe` made by name is rebuilt by
:func:`~evret_core.plugins.builder.rebuild` (an embedding model is loaded on the worker, never pickled), by the
component builder or by the function the recipe carries (``build``: how the RAG harness made the part);
:meth:`Recipe.of_object` wraps a part that was not made by name, which travels as the object (an executor pickles
it). Every object the builder creates remembers its recipe (:func:`recipe`); :func:`recipe_of` is how an executor
or the harness asks for the recipe of a part, with an LLM part's answer cache pinned to the file it uses here so
that every worker shares it.

Recipes travel to workers and are never written: a recipe's options may hold an API key, and its ``repr`` masks
them by the one redaction rule (:func:`evret_core.io.redact.redact`: any value under a secret name, tuples
and lists too, and credentials in URLs and texts, with a scheme or without).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

__all__ = ["Recipe", "recipe", "recipe_of"]


@runtime_checkable
class _FileCache(Protocol):
    """An answer cache kept in a file (:class:`~evret_core.llm.cache.JudgmentCache`): every worker shares it."""

    path: Any


@dataclass(frozen=True, repr=False)
class Recipe:
    """How to build a part of ``kind`` (a kind of :data:`evret_core.contracts.kinds.KINDS`, or the RAG harness's
    ``relevance``): from the registered ``name`` and ``options``, or, when ``name`` is None, the object ``part``
    itself (:meth:`of_object`; None for a part that is off, such as relevance ``none``). ``build``, when set, is
    called as ``build(name, options)`` instead of the component builder (a module-level function: it travels by
    reference)."""

    kind: str
    name: str | None = None
    options: dict[str, Any] = field(default_factory=dict)
    part: Any = None
    build: Callable[[Any, dict[str, Any]], Any] | None = None

    @classmethod
    def of_object(cls, kind: str, part: Any) -> Recipe:
        """The recipe of a part that was not made by name: the object itself."""
        return cls(kind, None, {}, part)

    @property
    def by_name(self) -> bool:
        """Whether the part is built from its name and options (else it is the object :attr:`part`)."""
        return self.name is not None

    def __repr__(self) -> str:
        if not self.by_name:
            return f"Recipe.of_object({self.kind!r}, {type(self.part).__name__})"
        from evret_core.io.redact import redact

        return f"Recipe({self.kind!r}, {self.name!r}, {redact(dict(self.options))!r})"


def recipe(obj: Any) -> Recipe | None:
    """The :class:`Recipe` that built ``obj`` through the component builder, or None for an object made otherwise."""
    got = getattr(obj, "__evret_recipe__", None)
    return got if isinstance(got, Recipe) else None


def recipe_of(kind: str, part: Any, name: str | None = None, options: dict[str, Any] | None = None,
              build: Callable[[Any, dict[str, Any]], Any] | None = None) -> Recipe:
    """How to make ``part`` (of ``kind``) again elsewhere: from ``name`` and ``options`` when it was made by name
    (given here, with the ``build`` function that made it if not the component builder, or remembered by the
    builder when it built the part as a ``kind``), else the object itself.

    A part made by name with an answer cache kept in a file (a :class:`~evret_core.llm.cache.JudgmentCache`) gets
    ``cache`` set to
    that file's absolute path, and an LLM part (with ``clients()``) without one gets ``cache=False``: every worker
    reads and writes the file this process uses, or none; so does an LLM part nested in it (the ``rerank``
    retriever's reranker, an LLM stage of a ``cascade`` judge: :func:`_pinned`)."""
    if name is None:
        made = recipe(part)
        if made is None or made.kind != kind:
            return Recipe.of_object(kind, part)
        name, options = made.name, made.options
    return Recipe(kind, name, _pinned(part, options or {}), build=build)


def _pinned(part: Any, options: Mapping[str, Any]) -> dict[str, Any]:
    """``options`` with ``part``'s answer cache pinned, and so for each part nested in it: an option that names a
    registered part (a name, or a table ``{name, options}``) kept under an attribute of the same name (the
    ``rerank`` retriever's ``reranker``) becomes a table with that part's cache pinned in its options. A part
    whose options list parts in a form of its own (the ``cascade`` judge's ``stages``) pins them itself:
    ``part.pinned_options(options, _pinned)``."""
    pinned = dict(options)
    own = getattr(part, "pinned_options", None)
    if callable(own):
        pinned = dict(own(pinned, _pinned))
    cache = getattr(part, "cache", None)
    if isinstance(cache, _FileCache):
        pinned["cache"] = str(Path(cache.path).resolve())
    elif callable(getattr(part, "clients", None)) and hasattr(part, "cache"):
        pinned["cache"] = False
    for option, value in options.items():
        nested = getattr(part, option, None) if isinstance(option, str) and option.isidentifier() else None
        if nested is None or nested is part:
            continue
        if isinstance(value, str) and value:
            name, inner = value, {}
        elif isinstance(value, Mapping) and isinstance(value.get("name"), str) and isinstance(
                value.get("options") or {}, Mapping):
            name, inner = value["name"], dict(value.get("options") or {})
        else:
            continue
        inner_pinned = _pinned(nested, inner)
        if inner_pinned != inner:
            pinned[option] = {**(value if isinstance(value, Mapping) else {}), "name": name, "options": inner_pinned}
    return pinned
