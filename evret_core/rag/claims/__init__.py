"""RAG stage 3, claims: is each claim of an answer supported by the contexts the generator saw.

The names of the old module ``evret_core.rag.claims`` (now :mod:`evret_core.rag.claims.claim_judges`) stay importable from here.
"""

from __future__ import annotations

import importlib
from typing import Any

_SUBMODULES = frozenset({"claim_judges", "llm_judge"})


def __getattr__(name: str) -> Any:
    if name.startswith("__") or name in _SUBMODULES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module("evret_core.rag.claims.claim_judges"), name)
