"""The plugin host: the kinds table, hookspecs, loading, the registry and the built-ins.

The names of the old module ``evret_core.plugins`` (now :mod:`evret_core.plugins.loading`) stay importable from here.
"""

from __future__ import annotations

import importlib
from typing import Any

_SUBMODULES = frozenset({"builtins", "hookspecs", "kinds", "loading", "recipes", "registry"})


def __getattr__(name: str) -> Any:
    if name.startswith("__") or name in _SUBMODULES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module("evret_core.plugins.loading"), name)
