"""Generation, claim judging and answer relevance for every (question, condition): pipelined or staged.

*Pipelined* (the default when a part calls an LLM): each answer is judged as soon as it arrives, in one event
loop, and every LLM call of the run (generator, claim judge, relevance) goes through one shared concurrency
pool per endpoint: the clients of parts that talk to the same provider endpoint share the first one's bound on
calls in flight and its rate budgets (:func:`share_pool`). No stage waits for the slowest call of the one before
it, so a run takes about (LLM calls / max_concurrency) x latency. *Staged*: one ``batch_generate`` over
everything, then one ``judge_claims``, then relevance. Both give the same results; parts without async methods
(the extractive generator, the lexical judge) run as one batch in either mode.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evret_core.aio import run_sync
from evret_core.errors import EvretError
from evret_core.llm.client import LLMClient, gather_all
from evret_core.rag.claims import ClaimTask, ClaimVerdict, claim_task
from evret_core.rag.generators import Answer, GenerationRequest, is_answers_file

Slot = tuple[str, int]  # (condition, question index)


@dataclass
class Outcome:
    """What one (question, condition) got: the answer (None: unmeasured), its verdicts and its relevance."""

    answer: Answer | None
    verdicts: list[ClaimVerdict] | None = None
    relevance: float | None = None
    task: ClaimTask | None = field(default=None, repr=False)


def check_answer(answer: Any, request: GenerationRequest) -> Answer | None:
    if answer is not None and not isinstance(answer, Answer):
        raise EvretError(f"generator returned a {type(answer).__name__} for question {request.question_id!r}; "
                         f"expected an Answer or None")
    return answer


def share_pool(clients: Sequence[LLMClient]) -> None:
    """Clients of one endpoint (equal ``provider.config()``) share one concurrency bound (the smallest
    ``max_concurrency`` among them) and the first one's requests- and tokens-per-minute budgets."""
    groups: dict[str, list[LLMClient]] = {}
    for client in dict.fromkeys(clients):
        ident = json.dumps(client.provider.config(), sort_keys=True, default=str)
        groups.setdefault(ident, []).append(client)
    for members in groups.values():
        first = min(members, key=lambda c: c.max_concurrency)
        for client in members:
            client.concurrency = first.concurrency
            client.limiter = members[0].limiter or client.limiter
            client.token_limiter = members[0].token_limiter or client.token_limiter


def _clients(parts: Sequence[Any]) -> list[LLMClient]:
    out: list[LLMClient] = []
    for part in parts:
        clients = getattr(part, "clients", None)
        if callable(clients):
            out.extend(clients())
    return out


Recipe = tuple[str, Any, dict[str, Any]]
"""How a part was made: ``("name", name, options)`` (rebuilt with the harness's own resolver elsewhere) or
``("object", obj, {})``."""


class Runner:
    """Runs the generation side of a RAG evaluation (see the module) for ``requests`` keyed by slot.

    ``recipes`` (role -> :data:`Recipe`) says how each part was made, so that an executor can rebuild the same
    parts on its workers (:func:`build_parts`)."""

    def __init__(self, generator: Any, claim_judge: Any, relevance: Any, pipelined: bool = True,
                 recipes: dict[str, Recipe] | None = None) -> None:
        self.generator = generator
        self.claim_judge = claim_judge
        self.relevance = relevance
        self.pipelined = pipelined
        self.recipes = recipes or {role: ("object", part, {}) for role, part in self.parts().items()}

    def parts(self) -> dict[str, Any]:
        return {"generator": self.generator, "claim_judge": self.claim_judge, "relevance": self.relevance}

    async def arun(self, requests: dict[Slot, GenerationRequest], close: bool = True) -> dict[Slot, Outcome]:
        """:meth:`run` on the running event loop. ``close=False`` keeps the parts' connections open for the
        loop's next runs (a worker running several chunks at once on one loop)."""
        if self.pipelined and self.async_parts:
            return await self._pipelined(requests, close=close)
        return await asyncio.to_thread(self._staged, requests)

    @property
    def async_parts(self) -> list[Any]:
        return [p for p, method in ((self.generator, "agenerate"), (self.claim_judge, "ajudge_task"),
                                    (self.relevance, "ascore")) if p is not None and callable(getattr(p, method, None))]

    def run(self, requests: dict[Slot, GenerationRequest]) -> dict[Slot, Outcome]:
        if self.pipelined and self.async_parts:
            return run_sync(self._pipelined(requests))
        return self._staged(requests)

    # -- staged ------------------------------------------------------------------------------------------------
    def _staged(self, requests: dict[Slot, GenerationRequest]) -> dict[Slot, Outcome]:
        out = self._staged_answers(requests)
        self._judge_rest(out, requests)
        return out

    def _judge_rest(self, out: dict[Slot, Outcome], requests: dict[Slot, GenerationRequest], judge: bool = True,
                    relevance: bool = True) -> None:
        """Claim verdicts (when ``judge``) and relevance (when ``relevance``), each as one batch."""
        todo = [s for s, o in out.items() if o.answer is not None and o.verdicts is None] if judge else []
        tasks = [claim_task(requests[s].question, out[s].answer, requests[s].contexts) for s in todo]  # type: ignore[arg-type]
        if tasks:
            verdicts = list(self.claim_judge.judge_claims(tasks))
            if len(verdicts) != len(tasks):
                raise EvretError(f"claim judge returned {len(verdicts)} verdict lists for {len(tasks)} answers")
            for slot, row in zip(todo, verdicts, strict=True):
                out[slot].verdicts = list(row)
        if self.relevance is None or not relevance:
            return
        scored = [s for s, o in out.items() if o.answer is not None]
        if callable(getattr(self.relevance, "ascore", None)):
            async def go() -> list[float | None]:
                try:
                    return await gather_all([self.relevance.ascore(requests[s].question, out[s].answer)
                                             for s in scored])
                finally:
                    await _close([self.relevance])

            values = run_sync(go()) if scored else []
        else:
            values = [self.relevance.score(requests[s].question, out[s].answer) for s in scored]
        for slot, value in zip(scored, values, strict=True):
            out[slot].relevance = value

    # -- pipelined ---------------------------------------------------------------------------------------------
    async def _pipelined(self, requests: dict[Slot, GenerationRequest], close: bool = True) -> dict[Slot, Outcome]:
        parts = self.async_parts
        clients = _clients(parts)
        share_pool(clients)
        for part in parts:  # every context scanned for injections before the first call: one WARNING per part
            prepare = getattr(part, "prepare", None)
            if callable(prepare):
                prepare(list(requests.values()))
        # Enough answers in progress to keep the pool full (each has a call waiting), few enough that calls do not
        # queue by the hundred: every freed slot wakes each waiting call to re-check the bound.
        bound = max([c.concurrency.maximum for c in clients] or [16])
        window = asyncio.Semaphore(bound + max(4, bound // 4))
        agenerate = getattr(self.generator, "agenerate", None)
        ajudge = getattr(self.claim_judge, "ajudge_task", None)
        ascore = getattr(self.relevance, "ascore", None) if self.relevance is not None else None
        ready: dict[Slot, Outcome] = {}
        if not callable(agenerate):  # a generator without LLM calls: one batch first, then judge as we go
            ready = self._staged_answers(requests)
        out: dict[Slot, Outcome] = {}

        async def one(slot: Slot) -> None:
            request = requests[slot]
            async with window:
                if slot in ready:
                    outcome = ready[slot]
                else:
                    outcome = Outcome(check_answer(await agenerate(request), request))  # type: ignore[misc]
                out[slot] = outcome
                if outcome.answer is None:
                    return
                work = []
                if callable(ajudge):
                    work.append(ajudge(claim_task(request.question, outcome.answer, request.contexts)))
                if callable(ascore):
                    work.append(ascore(request.question, outcome.answer))
                done = await gather_all(work)
                if callable(ajudge):
                    outcome.verdicts = list(done.pop(0))
                if callable(ascore):
                    outcome.relevance = done.pop(0)

        try:
            await gather_all([one(s) for s in requests])
        finally:
            if close:
                await _close(parts)
        ordered = {s: out[s] for s in requests}
        # the parts without async methods (a lexical judge, offline relevance) run as one batch at the end
        self._judge_rest(ordered, requests, judge=not callable(ajudge),
                         relevance=self.relevance is not None and not callable(ascore))
        return ordered

    def _staged_answers(self, requests: dict[Slot, GenerationRequest]) -> dict[Slot, Outcome]:
        slots = list(requests)
        answers = list(self.generator.batch_generate([requests[s] for s in slots])) if slots else []
        if len(answers) != len(slots):
            raise EvretError(f"generator returned {len(answers)} answers for {len(slots)} requests")
        return {s: Outcome(check_answer(a, requests[s])) for s, a in zip(slots, answers, strict=True)}


async def _close(parts: Sequence[Any]) -> None:
    for part in parts:
        close = getattr(part, "aclose", None)
        if callable(close):
            await close()


def build_parts(recipes: dict[str, Recipe]) -> dict[str, Any]:
    """The parts ``recipes`` describe, made as :class:`~evret_core.rag.RagEvaluator` makes them."""
    from evret_core.rag.generators import resolve_generator
    from evret_core.rag.harness import resolve_claim_judge
    from evret_core.rag.relevance import resolve_relevance

    out: dict[str, Any] = {}
    for role, (how, what, options) in recipes.items():
        if how == "object":
            out[role] = what
        elif role == "generator":
            out[role] = resolve_generator(what, **options)
        elif role == "claim_judge":
            out[role] = resolve_claim_judge(what, options or None)
        else:
            out[role] = resolve_relevance(what, options or None)
    return out


def recipe_of(role: str, given: Any, options: dict[str, Any] | None, built: Any) -> Recipe:
    """How the harness made ``built`` from ``given`` (a name, or an object used as is), with an LLM part's
    answer cache pinned to the file the part here uses, so that every worker shares it."""
    if not isinstance(given, (str, Path)) and given is not None:
        return ("object", built, {})
    name = str(given) if given is not None else None
    if role == "generator" and name is not None and is_answers_file(name):
        name = str(Path(name).resolve())
    options = dict(options or {})
    from evret_core.llm.cache import JudgmentCache

    if callable(getattr(built, "clients", None)) and hasattr(built, "cache"):  # an LLM part
        cache = built.cache
        options["cache"] = str(Path(cache.path).resolve()) if isinstance(cache, JudgmentCache) else False
    return ("name", name, options)
