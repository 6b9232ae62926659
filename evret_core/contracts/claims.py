"""The claim judge contract: a claim judge takes :class:`ClaimTask` s (a question, the answer's claims, the
contexts) and returns one :class:`ClaimVerdict` per claim (the ``claim_judge`` kind, hook
``register_claim_judges``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import field
from typing import Any

from evret_core.contracts.conversation import Turn
from evret_core.contracts.generation import Claim, Context
from evret_core.contracts.values import Value, value_type

VERDICTS = ("supported", "contradicted", "unsupported", "unmeasured")


@value_type
class ClaimTask(Value):
    """One answer to judge: its question, its claims (with citations) and the contexts it was given.

    ``extract`` says the answer listed no claims (``claims`` are then its sentences): a judge that can extract
    claims itself (the LLM claim judge) does so from ``answer_text`` instead. ``history``: for a turn of a
    conversation, the messages before it that a claim may also rest on (empty for a single question)."""

    question: str
    claims: tuple[Claim, ...]
    contexts: tuple[Context, ...]
    answer_text: str = ""
    extract: bool = False
    history: tuple[Turn, ...] = ()


@value_type
class ClaimVerdict(Value):
    """The verdict on one claim; ``supporting`` lists the ids of the contexts that support it."""

    claim: str
    citations: list[str]
    verdict: str
    supporting: list[str] = field(default_factory=list)
    contradicting: list[str] = field(default_factory=list)


class ClaimJudge:
    """What the RAG harness calls to judge claims (the base of the ``claim_judge`` kind).

    Implement :meth:`judge_claims`: one list of :class:`ClaimVerdict` per :class:`ClaimTask`, in order, one verdict
    per claim of the task (a judge that extracts claims, for a task with ``extract`` set, may return another
    number). Optionally ``async ajudge_task(task)`` (the verdicts on one task; the pipelined harness judges each
    answer as it arrives through it) and :meth:`config` (what the results record as ``config.claim_judge``)."""

    name = "claim-judge"

    def judge_claims(self, tasks: Sequence[ClaimTask]) -> list[list[ClaimVerdict]]:
        raise NotImplementedError

    def config(self) -> dict[str, Any]:
        return {"name": self.name}
