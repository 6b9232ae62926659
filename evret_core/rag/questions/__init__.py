"""RAG stage 1, questions: question sets, RGB import, context conditions and the texts a generator saw.

The names of the old module ``evret_core.rag.questions`` (now :mod:`evret_core.rag.questions.question_sets`) stay importable from here.
"""

from __future__ import annotations

from typing import Any

from evret_core.lazy import old_module_name


def __getattr__(name: str) -> Any:
    return old_module_name(__name__, "evret_core.rag.questions.question_sets", name)
