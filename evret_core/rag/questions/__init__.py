"""RAG stage 1, questions: question sets, RGB import, context conditions and the texts a generator saw.

The names of the old module ``evret_core.rag.questions`` (now :mod:`evret_core.rag.questions.question_sets`) stay importable from here.
"""

from __future__ import annotations

import importlib
from typing import Any

_SUBMODULES = frozenset({"case_texts", "conditions", "question_sets", "rgb"})


def __getattr__(name: str) -> Any:
    if name.startswith("__") or name in _SUBMODULES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module("evret_core.rag.questions.question_sets"), name)
