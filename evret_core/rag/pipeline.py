"""Generation, claim judging and answer relevance for every (question, condition): pipelined or staged.

*Pipelined* (the default when a part calls an LLM): each answer is judged as soon as it arrives, in one event
loop, and every LLM call of the run (generator, claim judge, relevance) goes through one shared concurrency
pool per endpoint: the clients of parts that talk to the same provider endpoint share the first one's bound on
calls in flight and its rate budgets (:func:`share_pool`). No stage waits for the slowest call of the one before
it, so a run takes about (LLM calls / max_concurrency) x latency. *Staged*: one ``batch_generate`` over
everything, then one ``judge_claims``, then relevance. Both give the same results; parts without async methods
(the extractive generator, the lexical judge) run in batches of :data:`CHUNK` in either mode.

Progress (:mod:`evret_core.progress`) is reported under three stages, each over every request: ``generate``
(one per answer as it arrives), ``claims`` (an answer's claims judged, or nothing to judge) and ``relevance``.
Pipelined, the three advance together.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, ClassVar

from evret_core.contracts.aio import run_sync
from evret_core.contracts.claims import ClaimTask, ClaimVerdict
from evret_core.contracts.conversation import Turn
from evret_core.contracts.errors import EvretError, did_you_mean
from evret_core.contracts.generation import Answer, GenerationRequest
from evret_core.llm.client import LLMClient, gather_all
from evret_core.plugins.builder import rebuild
from evret_core.plugins.recipes import Recipe, recipe_of
from evret_core.progress import ProgressCallback, report_progress
from evret_core.rag.claims.claim_judges import claim_task
from evret_core.rag.generate.generators import is_answers_file

Slot = tuple[str, int]  # (condition, question index)
CHUNK = 64
"""Requests per ``batch_generate`` / ``judge_claims`` call of a part without async methods (progress is reported
between calls)."""


@dataclass
class Outcome:
    """What one (question, condition) got: the answer (None: unmeasured), its verdicts and its relevance. The
    claim task is not kept: the driver rebuilds its history from the request as sent (``RagEvaluator._score``)."""

    answer: Answer | None
    verdicts: list[ClaimVerdict] | None = None
    relevance: float | None = None


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


class Runner:
    """Runs the generation side of a RAG evaluation (see the module) for ``requests`` keyed by slot.

    ``recipes`` (role -> :class:`~evret_core.plugins.recipes.Recipe`) says how each part was made, so that an
    executor can rebuild the same parts on its workers (:func:`build_parts`); by default each part is its own
    recipe (:meth:`~evret_core.plugins.recipes.Recipe.of_object`). ``progress`` gets ``(stage, done, total)`` (see the module).

    A request's ``history`` (a conversation turn's earlier messages) reaches the claim judges as
    ``ClaimTask.history``, filtered by :attr:`claims_history` (:func:`runner_class`)."""

    claims_history: ClassVar[str] = "all"
    """What the claim judges see of a request's history: ``all``, ``user`` (the user's messages) or ``none``; a
    class attribute, so that an executor that ships the runner's class to its workers (Ray) keeps it."""

    def __init__(self, generator: Any, claim_judge: Any, relevance: Any, pipelined: bool = True,
                 recipes: dict[str, Recipe] | None = None, progress: ProgressCallback | None = None) -> None:
        self.generator = generator
        self.claim_judge = claim_judge
        self.relevance = relevance
        self.pipelined = pipelined
        self.progress = progress
        self.recipes = recipes or {role: Recipe.of_object(role, part) for role, part in self.parts().items()}

    @classmethod
    def from_recipes(cls, recipes: dict[str, Recipe], pipelined: bool = True,
                     build: Callable[[Recipe], Any] = rebuild) -> Runner:
        """A runner whose parts ``build`` makes from ``recipes`` (role -> recipe; by default
        :func:`~evret_core.plugins.builder.rebuild`): how an executor's worker rebuilds the runner it was shipped
        the class of."""
        parts = {role: build(made) for role, made in recipes.items()}
        return cls(parts["generator"], parts["claim_judge"], parts["relevance"], pipelined=pipelined, recipes=recipes)

    def parts(self) -> dict[str, Any]:
        return {"generator": self.generator, "claim_judge": self.claim_judge, "relevance": self.relevance}

    def task(self, request: GenerationRequest, answer: Answer) -> ClaimTask:
        """The claim task of ``answer`` to ``request`` (:func:`claim_task_of` with :attr:`claims_history`)."""
        return claim_task_of(request, answer, self.claims_history)

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
    def prepare_parts(self, requests: dict[Slot, GenerationRequest]) -> None:
        """Let each part with a ``prepare(requests)`` see the whole run before its first call (the LLM parts
        scan every context for prompt injections there: one WARNING per part, staged or pipelined alike)."""
        for part in self.parts().values():
            prepare = getattr(part, "prepare", None)
            if part is not None and callable(prepare):
                prepare(list(requests.values()))

    def _staged(self, requests: dict[Slot, GenerationRequest]) -> dict[Slot, Outcome]:
        self.prepare_parts(requests)
        out = self._staged_answers(requests)
        self._judge_rest(out, requests)
        return out

    def _judge_rest(self, out: dict[Slot, Outcome], requests: dict[Slot, GenerationRequest], judge: bool = True,
                    relevance: bool = True) -> None:
        """Claim verdicts (when ``judge``) and relevance (when ``relevance``), each as one batch."""
        total = len(out)
        todo = [s for s, o in out.items() if o.answer is not None and o.verdicts is None] if judge else []
        if judge:
            self._report("claims", 0, total)
            judged = _Counter(self, "claims", total, total - len(todo))  # no answer: nothing to judge
            tasks = [self.task(requests[s], out[s].answer) for s in todo]  # type: ignore[arg-type]
            ajudge = getattr(self.claim_judge, "ajudge_task", None)
            if callable(ajudge) and tasks:  # every call at once, each answer counted as its verdicts arrive
                rows = judged.gather([ajudge(t) for t in tasks], self.claim_judge)
            else:
                rows = []
                for start in range(0, len(tasks), CHUNK):
                    chunk = tasks[start : start + CHUNK]
                    got = list(self.claim_judge.judge_claims(chunk))
                    if len(got) != len(chunk):
                        raise EvretError(f"claim judge returned {len(got)} verdict lists for {len(chunk)} answers")
                    rows.extend(got)
                    judged.step(len(chunk))
            for slot, row in zip(todo, rows, strict=True):
                out[slot].verdicts = list(row)
            judged.finish()
        if self.relevance is None or not relevance:
            return
        scored = [s for s, o in out.items() if o.answer is not None]
        self._report("relevance", 0, total)
        related = _Counter(self, "relevance", total, total - len(scored))
        if callable(getattr(self.relevance, "ascore", None)):
            values = related.gather([self.relevance.ascore(requests[s].question, out[s].answer) for s in scored],
                                    self.relevance) if scored else []
        else:
            values = []
            for s in scored:
                values.append(self.relevance.score(requests[s].question, out[s].answer))
                related.step()
        related.finish()
        for slot, value in zip(scored, values, strict=True):
            out[slot].relevance = value

    def _report(self, stage: str, done: int, total: int) -> None:
        report_progress(self.progress, stage, done, total)

    # -- pipelined ---------------------------------------------------------------------------------------------
    async def _pipelined(self, requests: dict[Slot, GenerationRequest], close: bool = True) -> dict[Slot, Outcome]:
        parts = self.async_parts
        clients = _clients(parts)
        share_pool(clients)
        self.prepare_parts(requests)
        # Enough answers in progress to keep the pool full (each has a call waiting), few enough that calls do not
        # queue by the hundred: every freed slot wakes each waiting call to re-check the bound.
        bound = max([c.concurrency.maximum for c in clients] or [16])
        window = asyncio.Semaphore(bound + max(4, bound // 4))
        agenerate = getattr(self.generator, "agenerate", None)
        ajudge = getattr(self.claim_judge, "ajudge_task", None)
        ascore = getattr(self.relevance, "ascore", None) if self.relevance is not None else None
        ready: dict[Slot, Outcome] = {}
        total = len(requests)
        if not callable(agenerate):  # a generator without LLM calls: batches first, then judge as we go
            ready = self._staged_answers(requests)
        else:
            self._report("generate", 0, total)
        generated = _Counter(self, "generate", total)
        judged = _Counter(self, "claims", total) if callable(ajudge) else None
        related = _Counter(self, "relevance", total) if callable(ascore) else None
        for counter in (judged, related):
            if counter is not None:
                self._report(counter.stage, 0, total)
        out: dict[Slot, Outcome] = {}

        async def one(slot: Slot) -> None:
            request = requests[slot]
            async with window:
                if slot in ready:
                    outcome = ready[slot]
                else:
                    outcome = Outcome(check_answer(await agenerate(request), request))  # type: ignore[misc]
                    generated.step()
                out[slot] = outcome
                if outcome.answer is None:
                    for counter in (judged, related):
                        if counter is not None:
                            counter.step()
                    return
                work = []
                if callable(ajudge):
                    work.append(ajudge(self.task(request, outcome.answer)))
                if callable(ascore):
                    work.append(ascore(request.question, outcome.answer))
                done = await gather_all(work)
                if judged is not None:
                    outcome.verdicts = list(done.pop(0))
                    judged.step()
                if related is not None:
                    outcome.relevance = done.pop(0)
                    related.step()

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
        self._report("generate", 0, len(slots))
        generated = _Counter(self, "generate", len(slots))
        out: dict[Slot, Outcome] = {}
        agenerate = getattr(self.generator, "agenerate", None)
        if callable(agenerate) and slots:  # every call at once, each answer counted as it arrives
            answers = generated.gather([agenerate(requests[s]) for s in slots], self.generator)
            out.update((s, Outcome(check_answer(a, requests[s]))) for s, a in zip(slots, answers, strict=True))
        else:
            for start in range(0, len(slots), CHUNK):
                chunk = slots[start : start + CHUNK]
                answers = list(self.generator.batch_generate([requests[s] for s in chunk]))
                if len(answers) != len(chunk):
                    raise EvretError(f"generator returned {len(answers)} answers for {len(chunk)} requests")
                out.update((s, Outcome(check_answer(a, requests[s]))) for s, a in zip(chunk, answers, strict=True))
                generated.step(len(chunk))
        generated.finish()
        return out


class UserHistoryRunner(Runner):
    """A :class:`Runner` whose claim judges see the user's earlier messages only (``claims_history="user"``)."""

    claims_history = "user"


class NoHistoryRunner(Runner):
    """A :class:`Runner` whose claim judges see no history (``claims_history="none"``)."""

    claims_history = "none"


RUNNER_CLASSES: dict[str, type[Runner]] = {cls.claims_history: cls
                                           for cls in (Runner, UserHistoryRunner, NoHistoryRunner)}
"""The runner class of each ``claims_history`` value."""

CLAIMS_HISTORY: tuple[str, ...] = tuple(RUNNER_CLASSES)
"""What the claim judges may see of a turn's history (``--claims-history``): every earlier message (as MTRAG's
raters did), the user's, none; the one list of these values (the CLI's choices are tested against it)."""


def runner_class(claims_history: str = "all") -> type[Runner]:
    """The runner class whose claim judges see ``claims_history`` of each request's history (``all``, ``user``,
    ``none``); the one check of the value (an :class:`EvretError` naming the choices)."""
    if claims_history not in RUNNER_CLASSES:
        raise EvretError(f"unknown claims history {claims_history!r}{did_you_mean(str(claims_history), CLAIMS_HISTORY)}"
                         f"; use {', '.join(CLAIMS_HISTORY)}")
    return RUNNER_CLASSES[claims_history]


def claim_task_of(request: GenerationRequest, answer: Answer, claims_history: str = "all") -> ClaimTask:
    """:func:`~evret_core.rag.claims.claim_judges.claim_task` of ``answer`` over the request's contexts, with
    ``ClaimTask.history`` the request's history as ``claims_history`` keeps it (``all``, ``user``, ``none``); a
    request without history gives the task ``claim_task`` gives."""
    task = claim_task(request.question, answer, request.contexts)
    kept = claims_history_of(request.history, claims_history)
    return replace(task, history=kept) if kept else task


def claims_history_of(history: tuple[Turn, ...], claims_history: str = "all") -> tuple[Turn, ...]:
    """The messages of ``history`` the claim judges see under ``claims_history``: all of them, the user's, or
    none."""
    if claims_history == "none":
        return ()
    return history if claims_history == "all" else tuple(t for t in history if t.role == "user")


class _Counter:
    """Items finished in one stage, reported to the runner's progress as they finish."""

    def __init__(self, runner: Runner, stage: str, total: int, done: int = 0) -> None:
        self.runner, self.stage, self.total, self.done = runner, stage, total, done
        self.reported = -1

    def step(self, n: int = 1) -> None:
        self.done += n
        self.reported = self.done
        self.runner._report(self.stage, self.done, self.total)

    def gather(self, calls: Sequence[Awaitable[Any]], part: Any) -> list[Any]:
        """Every call's result, in order, run at once (``part``'s connections closed after), each counted as it
        finishes."""
        async def one(call: Awaitable[Any]) -> Any:
            value = await call
            self.step()
            return value

        async def go() -> list[Any]:
            try:
                return await gather_all([one(c) for c in calls])
            finally:
                await _close([part])

        return run_sync(go())

    def finish(self) -> None:
        """The end of the stage, reported even when nothing was left to do in it."""
        if self.reported != self.total:
            self.reported = self.total
            self.runner._report(self.stage, self.total, self.total)


async def _close(parts: Sequence[Any]) -> None:
    for part in parts:
        close = getattr(part, "aclose", None)
        if callable(close):
            await close()


def build_parts(recipes: dict[str, Recipe]) -> dict[str, Any]:
    """The parts ``recipes`` describe (role -> part), made as :class:`~evret_core.rag.RagEvaluator` makes them
    (:func:`~evret_core.plugins.builder.rebuild`)."""
    return {role: rebuild(made) for role, made in recipes.items()}


def part_recipe(role: str, given: Any, options: dict[str, Any] | None, built: Any,
                build: Callable[[Any, dict[str, Any]], Any]) -> Recipe:
    """The recipe of the part ``built`` for ``role`` from ``given`` (a name, an answers file, or an object used as
    is) and its ``options``, rebuilt by ``build(name, options)`` (the resolver that made it here;
    :func:`~evret_core.plugins.recipes.recipe_of`: an LLM part's answer cache pinned to the file the part here
    uses, so that every worker shares it)."""
    if not isinstance(given, (str, Path)):
        return recipe_of(role, built)
    name = str(given)
    if role == "generator" and is_answers_file(name):
        name = str(Path(name).resolve())
    return recipe_of(role, built, name, options, build)
