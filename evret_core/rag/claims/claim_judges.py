"""Generation judges: is each claim of an answer supported by the contexts the generator saw?

A generation judge takes :class:`ClaimTask` s (a question, the answer's claims, the contexts) and returns one
:class:`ClaimVerdict` per claim: ``supported`` / ``contradicted`` / ``unsupported`` (or ``unmeasured`` when the
judgment could not be made), with every context id that supports the claim. From the verdicts come groundedness,
faithfulness and citation precision / recall (:func:`claim_scores`).

The cheap judge, :class:`LexicalClaimJudge`, takes claims as given (or the answer's sentences when it lists none)
and asks any Evret judge (``token-overlap`` by default; ``exact``, ``regex``, ``semantic``...) whether a claim
matches a context, the claim as the expected text and the context as the retrieved text. A lexical judge cannot
see a contradiction, so it never says ``contradicted``.

For a turn of a conversation (``ClaimTask.history``), each earlier message is one more piece of evidence beside the
contexts, with the id ``history:{i}:{role}`` (:func:`evidence`): a claim may rest on it, but it is never a
citation (:func:`claim_scores` counts citations of contexts only, and ``history_support_rate``). The LLM claim judge
(:mod:`evret_core.rag.claims.llm_judge`), which extracts and verifies claims, plugs in through the same ``judge_claims``.

Claim judges are a plugin kind (:class:`ClaimJudge`, hook ``register_claim_judges``): the built-ins are ``lexical``
and ``llm``; ``evret rag --claim-judge NAME`` takes a registered claim judge's name, or an Evret judge's name for the
lexical claim judge over that judge.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from evret_core.contracts.claims import ClaimJudge, ClaimTask, ClaimVerdict
from evret_core.contracts.conversation import Turn
from evret_core.contracts.errors import EvretError
from evret_core.contracts.generation import Answer, Claim, Context
from evret_core.contracts.judge import JudgmentContext
from evret_core.text import split_sentences


def claim_task(question: str, answer: Answer, contexts: Sequence[Context]) -> ClaimTask:
    """The :class:`ClaimTask` of one answer."""
    extract = not answer.claims and not (answer.refused or answer.escalated or answer.clarified) and bool(
        answer.text.strip())
    return ClaimTask(question, claims_of(answer), tuple(contexts), answer_text=answer.text, extract=extract)


HISTORY_PREFIX = "history:"
"""How the id of a conversation message given as claim evidence starts (``history:{i}:{role}``)."""


def history_id(index: int, role: str) -> str:
    """The evidence id of message ``index`` (0-based, in ``ClaimTask.history``) said by ``role``."""
    return f"{HISTORY_PREFIX}{index}:{role}"


def is_history_id(doc_id: str) -> bool:
    """Whether ``doc_id`` names a conversation message rather than a context."""
    return doc_id.startswith(HISTORY_PREFIX)


def history_evidence(history: Sequence[Turn]) -> tuple[Context, ...]:
    """Each message of ``history`` as a piece of evidence: its id ``history:{i}:{role}`` and its text."""
    return tuple(Context(history_id(i, turn.role), turn.text) for i, turn in enumerate(history))


def evidence(task: ClaimTask) -> tuple[Context, ...]:
    """What a claim of ``task`` may rest on: the contexts, then each history message (:func:`history_evidence`);
    the contexts alone for a task without history. A context whose id starts with ``history:`` beside a history is
    an :class:`EvretError` (its id would read as a message's)."""
    if not task.history:
        return task.contexts
    clash = next((c.doc_id for c in task.contexts if is_history_id(c.doc_id)), None)
    if clash is not None:
        raise EvretError(f"context id {clash!r} starts with {HISTORY_PREFIX!r}, which names the conversation's "
                         f"messages as claim evidence (history:<index>:<role>); rename that document")
    return task.contexts + history_evidence(task.history)


def claims_of(answer: Answer) -> tuple[Claim, ...]:
    """The answer's claims; when it lists none, its sentences (without citations). A refusal, an escalation or a
    clarifying question makes no claims."""
    if answer.claims:
        return tuple(answer.claims)
    if answer.refused or answer.escalated or answer.clarified:
        return ()
    return tuple(Claim(text=s) for s in split_sentences(answer.text))


class LexicalClaimJudge(ClaimJudge):
    """Claim support by an Evret judge (``token-overlap`` without the query boost by default).

    :param judge: a judge object or a registered judge name.
    :param options: options for a judge given by name.
    """

    name = "lexical"

    def __init__(self, judge: Any = "token-overlap", **options: Any) -> None:
        from evret_core.plugins.registry import create_judge

        if isinstance(judge, str):
            if judge == "token-overlap":
                # the question's words say nothing about whether a context supports a claim
                options.setdefault("query_boost", False)
            judge = create_judge(judge, **options)
        elif options:
            raise EvretError("claim judge options apply only to a judge given by name")
        self.judge = judge

    def judge_claims(self, tasks: Sequence[ClaimTask]) -> list[list[ClaimVerdict]]:
        plan: dict[JudgmentContext, None] = {}
        pieces = [evidence(task) for task in tasks]  # a bad id fails here, before the judge is asked anything
        for task, given in zip(tasks, pieces, strict=True):
            for claim in task.claims:
                for ctx in given:
                    plan.setdefault(JudgmentContext(query=task.question, expected_text=claim.text,
                                                    retrieved_text=ctx.text), None)
        contexts = list(plan)
        prepare = getattr(self.judge, "prepare", None)
        if callable(prepare) and contexts:
            prepare(contexts)
        answers = list(self.judge.batch_judge(contexts)) if contexts else []
        if len(answers) != len(contexts):
            raise EvretError(f"judge {self.judge!r} returned {len(answers)} answers for {len(contexts)} contexts")
        verdicts = dict(zip(contexts, answers, strict=True))
        out: list[list[ClaimVerdict]] = []
        for task, given in zip(tasks, pieces, strict=True):
            row = []
            for claim in task.claims:
                said = [(ctx.doc_id, verdicts[JudgmentContext(query=task.question, expected_text=claim.text,
                                                              retrieved_text=ctx.text)]) for ctx in given]
                supporting = list(dict.fromkeys(doc for doc, v in said if v))
                if supporting:
                    verdict = "supported"
                elif any(v is None for _, v in said):
                    verdict = "unmeasured"
                else:
                    verdict = "unsupported"
                row.append(ClaimVerdict(claim=claim.text, citations=list(claim.citations), verdict=verdict,
                                        supporting=supporting))
            out.append(row)
        return out

    def config(self) -> dict[str, Any]:
        config = getattr(self.judge, "config", None)
        return {"name": self.name, "judge": config() if callable(config) else repr(self.judge)}


def claim_scores(verdicts: Sequence[ClaimVerdict], history: bool = False) -> dict[str, float]:
    """Per-answer generation scores (NaN when not applicable, e.g. an answer without claims):

    - ``groundedness``: supported claims / claims (supported by a context or, with a history, by a message);
    - ``faithfulness``: 1 when every claim is supported (none contradicted, none unsupported), else 0; an
      unsupported claim is never faithful;
    - ``contradiction_rate``: contradicted claims / claims;
    - ``citation_precision``: citations whose context supports their claim / citations (NaN without citations);
    - ``citation_recall``: claims with a supporting cited context / claims;
    - ``history_support_rate``, only when ``history`` (the claims were judged against a conversation's earlier
      messages too): claims supported by messages only (every supporting id ``history:...``) / claims.

    With ``history``, a ``history:...`` id is never a citation: citations count contexts only. Unmeasured claims
    are left out of every denominator.
    """
    measured = [v for v in verdicts if v.verdict != "unmeasured"]
    nan = math.nan
    if not measured:
        empty = {"groundedness": nan, "faithfulness": nan, "contradiction_rate": nan, "citation_precision": nan,
                 "citation_recall": nan}
        return {**empty, "history_support_rate": nan} if history else empty
    n = len(measured)
    supported = sum(v.verdict == "supported" for v in measured)
    contradicted = sum(v.verdict == "contradicted" for v in measured)
    cited = [(v, [c for c in v.citations if not (history and is_history_id(c))]) for v in measured]
    citations = [(c, v) for v, own in cited for c in own]
    good = sum(c in v.supporting for c, v in citations)
    scores = {
        "groundedness": supported / n,
        "faithfulness": float(supported == n),
        "contradiction_rate": contradicted / n,
        "citation_precision": good / len(citations) if citations else nan,
        "citation_recall": sum(any(c in v.supporting for c in own) for v, own in cited) / n,
    }
    if history:
        scores["history_support_rate"] = sum(
            v.verdict == "supported" and bool(v.supporting) and all(is_history_id(s) for s in v.supporting)
            for v in measured) / n
    return scores
