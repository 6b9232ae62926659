"""The plugin host: the kinds table, hookspecs, loading, the registry and the built-ins.

The names of the old module ``evret_core.plugins`` (now :mod:`evret_core.plugins.loading`) stay importable from here.
"""

from __future__ import annotations

from typing import Any

from evret_core.lazy import old_module_name


def __getattr__(name: str) -> Any:
    return old_module_name(__name__, "evret_core.plugins.loading", name)
