"""The RAG score contract: a :class:`RagScore` declares the score names it gives and computes them for one
answer (:class:`ScoreInput`) (the ``rag_score`` kind, hook ``register_rag_scores``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field
from typing import Any

from evret_core.contracts.claims import ClaimVerdict
from evret_core.contracts.conversation import Turn
from evret_core.contracts.data import Question
from evret_core.contracts.generation import Answer, Context
from evret_core.contracts.values import Value, value_type


@value_type
class ScoreInput(Value):
    """One answer to score: its question (with labels), the condition, the contexts the generator saw, the answer,
    the claim verdicts, the behaviour expected under this condition (``answer``, ``refuse``...), the answer's
    relevance to the question (None when not measured), what the condition recorded about the case (an
    adversarial family's ``family``, ``planted_answer``...) and, for a turn of a conversation, the earlier messages
    the claims were judged against (``ClaimTask.history``; empty for a single question)."""

    question: Question
    condition: str
    contexts: tuple[Context, ...]
    answer: Answer
    verdicts: tuple[ClaimVerdict, ...]
    expected_behaviour: str
    relevance: float | None = None
    info: Mapping[str, Any] = field(default_factory=dict)
    history: tuple[Turn, ...] = ()

    @property
    def prediction(self) -> str:
        """The answer's text, or "" for a refusal, an escalation or a clarifying question (it answers nothing)."""
        a = self.answer
        return "" if a.refused or a.escalated or a.clarified else a.text

    @property
    def golds(self) -> list[str]:
        """The gold answer strings when an answer is expected, else none."""
        return self.question.answer_strings if self.expected_behaviour == "answer" else []


class RagScore:
    """The base of the ``rag_score`` kind: set ``name`` and ``metrics`` (every score name :meth:`score` may
    return; the results, the terminal table and ``--fail-under CONDITION/NAME`` know them) and implement
    :meth:`score`."""

    name = "rag-score"
    metrics: tuple[str, ...] = ()

    def score(self, item: ScoreInput) -> Mapping[str, float | None]:
        raise NotImplementedError

    def config(self) -> dict[str, Any]:
        return {"name": self.name}
