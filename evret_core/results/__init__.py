"""Stage 7, results: retrieval and RAG results, per-query detail, tables, safe output files and redaction.

The names of the old module ``evret_core.results`` (now :mod:`evret_core.results.evaluation`) stay importable from here.
"""

from __future__ import annotations

import importlib
from typing import Any

_SUBMODULES = frozenset({"evaluation", "files", "frames", "model", "outputs", "per_query", "rag_results", "redact",
                         "tracking"})


def __getattr__(name: str) -> Any:
    if name.startswith("__") or name in _SUBMODULES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module("evret_core.results.evaluation"), name)
