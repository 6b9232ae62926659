"""Recipes: how a part was built (a kind, a registered name and options, or the object itself), so that an executor
can build the same part again in another process.

One format serves every part an executor rebuilds on its workers: the retrieval evaluator's judge and retriever,
and the RAG harness's generator, claim judge and answer relevance. A :class:`Recipe` made by name is rebuilt by
:func:`rebuild` (an embedding model is loaded on the worker, never pickled); :meth:`Recipe.of_object` wraps a part
that was not made by name, which travels as the object (an executor pickles it). Every object :func:`build`
creates remembers its recipe (:func:`recipe`); :func:`recipe_of` is how an executor or the harness asks for the
recipe of a part, with an LLM part's answer cache pinned to the file it uses here so that every worker shares it.

Recipes travel to workers and are never written: a recipe's options may hold an API key, and its ``repr`` masks
them by the one redaction rule (:func:`evret_core.io.redact.redact`: any value under a secret name, tuples
and lists too, and credentials in URLs and texts, with a scheme or without).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evret_core.contracts.errors import EvretError, did_you_mean
from evret_core.contracts.hooks import LazyFactory
from evret_core.plugins.loading import get_registry, plugin_exits_as_errors

__all__ = ["Recipe", "build", "rebuild", "recipe", "recipe_of"]

# the kinds whose parts the RAG harness makes from more than a registered name (a generator from an answers file,
# the lexical claim judge over a judge's name, relevance "lexical" / "llm" / "none"): rebuilt the way the harness
# made them; every other kind is built by the registry
_RESOLVERS: dict[str, LazyFactory] = {
    "generator": LazyFactory("evret_core.rag.generate.generators:resolve_generator"),
    "claim_judge": LazyFactory("evret_core.rag.claims.llm_judge:resolve_claim_judge"),
    "relevance": LazyFactory("evret_core.rag.scores.relevance:resolve_relevance"),
}


@dataclass(frozen=True, repr=False)
class Recipe:
    """How to build a part of ``kind`` (a kind of :data:`evret_core.contracts.kinds.KINDS`, or the RAG harness's
    ``relevance``): from the registered ``name`` and ``options``, or, when ``name`` is None, the object ``part``
    itself (:meth:`of_object`; None for a part that is off, such as relevance ``none``)."""

    kind: str
    name: str | None = None
    options: dict[str, Any] = field(default_factory=dict)
    part: Any = None

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


def build(kind: str, name: str, options: dict[str, Any]) -> Any:
    """The object registered as ``name`` for ``kind``, built with ``options`` (checked against the factory's
    signature first), remembering its :class:`Recipe`."""
    factory = get_registry().get(kind, name)
    try:
        inspect.signature(factory).bind(**options)
    except TypeError as exc:
        accepted = _accepted_options(factory)
        typo = next((o for o in options if o not in accepted), None)
        hint = (f"{did_you_mean(typo, accepted) if typo else ''}; accepted options: {', '.join(accepted)}"
                if accepted else "")
        raise EvretError(f"{kind.replace('_', ' ')} {name!r}: bad options ({exc}){hint}") from None
    except ValueError:  # builtins without a signature
        pass
    with plugin_exits_as_errors():
        built = factory(**options)
    try:
        built.__evret_recipe__ = Recipe(kind, name, dict(options))
    except (AttributeError, TypeError, ValueError):  # slots, frozen or builtin objects: not rebuildable by name
        pass
    return built


def _accepted_options(factory: Any) -> list[str]:
    try:
        params = inspect.signature(factory).parameters.values()
    except (TypeError, ValueError):
        return []
    return [p.name for p in params if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)]


def recipe(obj: Any) -> Recipe | None:
    """The :class:`Recipe` that built ``obj`` through the registry, or None for an object made otherwise."""
    got = getattr(obj, "__evret_recipe__", None)
    return got if isinstance(got, Recipe) else None


def recipe_of(kind: str, part: Any, name: str | None = None, options: dict[str, Any] | None = None) -> Recipe:
    """How to make ``part`` (of ``kind``) again elsewhere: from ``name`` and ``options`` when it was made by name
    (given here, or remembered by the registry when it built the part as a ``kind``), else the object itself.

    A part made by name with an answer cache (a :class:`~evret_core.llm.cache.JudgmentCache`) gets ``cache`` set to
    that file's absolute path, and an LLM part (with ``clients()``) without one gets ``cache=False``: every worker
    reads and writes the file this process uses, or none."""
    if name is None:
        made = recipe(part)
        if made is None or made.kind != kind:
            return Recipe.of_object(kind, part)
        name, options = made.name, made.options
    pinned = dict(options or {})
    from evret_core.llm.cache import JudgmentCache

    cache = getattr(part, "cache", None)
    if isinstance(cache, JudgmentCache):
        pinned["cache"] = str(Path(cache.path).resolve())
    elif callable(getattr(part, "clients", None)) and hasattr(part, "cache"):
        pinned["cache"] = False
    return Recipe(kind, name, pinned)


def rebuild(made: Recipe) -> Any:
    """The part ``made`` describes, built in this process: by the registry from its name and options (the RAG
    harness's generator, claim judge and relevance as the harness makes them), or the object it carries."""
    if not made.by_name:
        return made.part
    resolve = _RESOLVERS.get(made.kind)
    if resolve is None:
        return build(made.kind, str(made.name), dict(made.options))
    if made.kind == "generator":
        return resolve(made.name, **made.options)
    return resolve(made.name, dict(made.options) or None)
