"""Names imported on first use (PEP 562 module ``__getattr__``): the public names of `evret_core`, its SDK and
`evret_core.rag`."""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any


def lazy_export(namespace: dict[str, Any], exports: Mapping[str, str], name: str) -> Any:
    """``name`` from the module ``exports`` maps it to, imported now and kept in ``namespace`` (a module's
    ``globals()``) so that later lookups skip the module's ``__getattr__``."""
    module = exports.get(name)
    if module is None:
        raise AttributeError(f"module {namespace['__name__']!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    namespace[name] = value
    return value
