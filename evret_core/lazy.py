"""Names imported on first use (PEP 562 module ``__getattr__``): the public names of `evret_core`, its SDK and
`evret_core.rag`, and the old names of modules that became packages when the core was laid out by stage."""

from __future__ import annotations

import importlib
import importlib.util
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


def old_module_name(package: str, module: str, name: str) -> Any:
    """``name`` of ``module``, the code of the old module ``package`` before it became a package. A submodule of
    ``package`` is left to the import system (``from package import submodule`` asks here first)."""
    if name.startswith("__") or importlib.util.find_spec(f"{package}.{name}") is not None:
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
