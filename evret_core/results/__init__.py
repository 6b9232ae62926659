"""Stage 7, results: retrieval and RAG results, per-query detail, tables, safe output files and redaction.

The names of the old module ``evret_core.results`` (now :mod:`evret_core.results.evaluation`) stay importable from here.
"""

from __future__ import annotations

from typing import Any

from evret_core.lazy import old_module_name


def __getattr__(name: str) -> Any:
    return old_module_name(__name__, "evret_core.results.evaluation", name)
