"""Evret's built-ins, registered through the same hooks as third-party plugins.

They register :class:`LazyFactory` objects, so that loading and listing plugins (``evret plugins``) imports
neither numpy, pydantic nor asyncio: the class behind a name is imported when that name is first used.
"""

from __future__ import annotations

import importlib
import inspect
from typing import Any

BUILTIN_PLUGINS = (
    "evret_core.default_plugins.judges",
    "evret_core.default_plugins.metrics",
    "evret_core.default_plugins.evaluators",
    "evret_core.default_plugins.output_evaluators",
    "evret_core.default_plugins.criteria_judges",
    "evret_core.default_plugins.generators",
    "evret_core.default_plugins.perturbations",
    "evret_core.default_plugins.claim_judges",
    "evret_core.default_plugins.rag_scores",
    "evret_core.default_plugins.retrievers",
    "evret_core.default_plugins.executors",
)


class LazyFactory:
    """A factory named ``"package.module:Name"``, imported on first use; calls, ``inspect.signature`` (option
    checks) and ``load()`` see the real class."""

    def __init__(self, target: str) -> None:
        self.target = target
        self._loaded: Any = None

    def load(self) -> Any:
        if self._loaded is None:
            module, _, name = self.target.partition(":")
            self._loaded = getattr(importlib.import_module(module), name)
        return self._loaded

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.load()(*args, **kwargs)

    @property
    def __signature__(self) -> inspect.Signature:
        return inspect.signature(self.load())

    def __repr__(self) -> str:
        return f"LazyFactory({self.target!r})"
