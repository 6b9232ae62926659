"""RAG stage 3, claims: is each claim of an answer supported by the contexts the generator saw.

The names of the old module ``evret_core.rag.claims`` (now :mod:`evret_core.rag.claims.claim_judges`) stay importable from here.
"""

from __future__ import annotations

from typing import Any

from evret_core.lazy import old_module_name


def __getattr__(name: str) -> Any:
    return old_module_name(__name__, "evret_core.rag.claims.claim_judges", name)
