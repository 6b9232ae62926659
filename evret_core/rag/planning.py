"""``--dry-run`` for the RAG harness: generator, claim-judge and relevance calls and tokens, after the cache.

Nothing is sent. Answers come from where they can without a call: the cache of the ``llm`` generator, or the
offline generators themselves (``extractive``, precomputed answers files), which are run. The judge and relevance
calls of those answers are counted exactly (minus what their caches hold). For an answer that would have to be
generated first, they are estimated: as many claims as the known answers make on average (3 when none is
known), each a verification over the request's contexts, plus one relevance call.

With ``history="generated"`` a turn's history holds the system's own earlier answers, unknown before they are
made: its requests are planned with the reference history. A turn wrong under ``retrieved`` after an earlier
wrong turn is answered once more with the reference history (``carried_failure``); which turns those are is known
only after the answers, so the plan gives the bound (:func:`reanswer_slots`): ``reanswers_at_most``,
``generator_calls_at_most``, and in ``llm_total`` ``calls_at_most_with_reanswers`` (each re-answer costed as an
answer still to be generated).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from evret_core.contracts.errors import EvretError
from evret_core.contracts.generation import Answer, GenerationRequest
from evret_core.contracts.perturb import ConditionCase
from evret_core.rag.generate.extractive import ExtractiveGenerator
from evret_core.rag.generate.generators import PrecomputedGenerator
from evret_core.rag.pipeline import claim_task_of
from evret_core.rag.questions.question_sets import QuestionSet
from evret_core.rag.turns import TurnQuestions

DEFAULT_CLAIMS_GUESS = 3
PROMPT_OVERHEAD_TOKENS = 250  # system prompt, schema and instructions of one judge call


def plan_run(evaluator: Any, questions: QuestionSet, cases: Mapping[str, list[ConditionCase]],
             requests: Mapping[tuple[str, int], GenerationRequest]) -> dict[str, Any]:
    """The plan of :meth:`RagEvaluator.evaluate` (see the module)."""
    generator, judge, relevance = evaluator.generator, evaluator.claim_judge, evaluator.relevance
    plan: dict[str, Any] = {"questions": len(questions), "conditions": list(cases),
                            "generator_calls": len(requests),
                            "contexts": sum(len(case.contexts) for c in cases.values() for case in c)}
    again: list[tuple[str, int]] = []  # the slots that may be answered again (history="generated")
    if getattr(evaluator, "history", "reference") == "generated" and isinstance(questions, TurnQuestions):
        again = reanswer_slots(questions, requests)
        plan["history"] = "generated"
        plan["reanswers_at_most"] = len(again)
        plan["generator_calls_at_most"] = len(requests) + len(again)
    known: dict[tuple[str, int], Answer | None] = {}
    if isinstance(generator, (ExtractiveGenerator, PrecomputedGenerator)):  # offline: answering costs nothing
        slots = list(requests)
        known = dict(zip(slots, generator.batch_generate([requests[s] for s in slots]), strict=True))
    elif callable(getattr(generator, "lookup", None)):
        for slot, request in requests.items():
            try:
                answer = generator.lookup(request)
            except EvretError:  # no provider (no key): nothing is known, everything is estimated
                break
            if answer is not None:
                known[slot] = answer
    if callable(getattr(generator, "plan", None)):
        plan["generator"] = dict(generator.plan(list(requests.values())))
    unknown = [s for s in requests if s not in known]
    answered = {s: a for s, a in known.items() if a is not None}
    totals = {"calls": int(plan.get("generator", {}).get("calls", 0)),
              "estimated_input_tokens": int(plan.get("generator", {}).get("estimated_input_tokens", 0)),
              "estimated_output_tokens": int(plan.get("generator", {}).get("estimated_output_tokens", 0))}
    claims_history = getattr(evaluator, "claims_history", "all")
    tasks = [claim_task_of(requests[s], a, claims_history) for s, a in answered.items()]
    with_claims = [len(t.claims) for t in tasks if t.claims]
    claims_guess = sum(with_claims) / len(with_claims) if with_claims else DEFAULT_CLAIMS_GUESS
    extra = len(again) if "generator" in plan else 0  # LLM calls of the re-answers, at most
    if callable(getattr(judge, "plan", None)) and callable(getattr(judge, "clients", None)):
        judged = dict(judge.plan(tasks))
        guess = round(claims_guess * sum(bool(requests[s].contexts) for s in unknown))
        guess_tokens = round(claims_guess * sum(_tokens(requests[s]) for s in unknown if requests[s].contexts))
        judged["answers_known"] = len(tasks)
        judged["answers_not_yet_generated"] = len(unknown)
        judged["estimated_calls_for_those"] = guess
        plan["claim_judge"] = judged
        extra += round(claims_guess * sum(bool(requests[s].contexts) for s in again))
        _add(totals, judged["calls"] + guess, judged["estimated_input_tokens"] + guess_tokens,
             judged["estimated_output_tokens"] + guess * 50)
    if relevance is not None and callable(getattr(relevance, "plan", None)):
        scored = dict(relevance.plan([(requests[s].question, a) for s, a in answered.items()]))
        scored["estimated_calls_for_not_yet_generated"] = len(unknown)
        plan["relevance"] = scored
        extra += len(again)
        _add(totals, scored["calls"] + len(unknown), scored["estimated_input_tokens"] + 200 * len(unknown),
             scored["estimated_output_tokens"] + 40 * len(unknown))
    if any(key in plan for key in ("generator", "claim_judge", "relevance")):
        plan["llm_total"] = totals
        if "reanswers_at_most" in plan:
            totals["calls_at_most_with_reanswers"] = totals["calls"] + extra
    else:
        plan["note"] = (f"generator {getattr(generator, 'name', type(generator).__name__)!r} and the claim judge "
                        f"make no LLM calls")
    return plan


def reanswer_slots(questions: TurnQuestions, requests: Mapping[tuple[str, int], GenerationRequest]
                   ) -> list[tuple[str, int]]:
    """The ``retrieved`` slots a run with generated history may answer again with the reference history
    (``RagEvaluator._carry``): a turn with a ``gold`` and a ``retrieved`` request (only such a turn can be right
    under ``gold`` and wrong under ``retrieved``) after an earlier turn of its conversation with a ``retrieved``
    request (one that can be wrong there)."""
    seen: set[str] = set()  # conversations with an earlier turn answered under retrieved
    out: list[tuple[str, int]] = []
    for i, q in enumerate(questions.questions):
        if ("retrieved", i) not in requests:
            continue
        conversation = questions.turns[q.question_id].conversation_id
        if conversation in seen and ("gold", i) in requests:
            out.append(("retrieved", i))
        seen.add(conversation)
    return out


def _tokens(request: GenerationRequest) -> int:
    return (len(request.question) + sum(len(c.text) + len(c.doc_id) + 60 for c in request.contexts)) // 4 \
        + PROMPT_OVERHEAD_TOKENS


def _add(totals: dict[str, int], calls: int, tokens_in: int, tokens_out: int) -> None:
    totals["calls"] += int(calls)
    totals["estimated_input_tokens"] += int(tokens_in)
    totals["estimated_output_tokens"] += int(tokens_out)
