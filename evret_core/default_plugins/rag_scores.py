"""Built-in RAG scores: claims (groundedness, faithfulness, citations), answer-match (exact, F1) and behaviour
(refused, behaviour_ok)."""

from __future__ import annotations

from evret_core.default_plugins import LazyFactory
from evret_core.hookspecs import Register, hookimpl


@hookimpl
def register_rag_scores(register: Register) -> None:
    register("claims", LazyFactory("evret_core.rag.scoring:ClaimScores"))
    register("answer-match", LazyFactory("evret_core.rag.scoring:AnswerMatch"))
    register("behaviour", LazyFactory("evret_core.rag.scoring:Behaviour"))
