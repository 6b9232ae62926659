"""What runs inside Ray workers: the judging, grading, retrieval, rewriting and generation actors (each builds its part once and
keeps it for every batch and every run it serves) and the metric task."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import ray

from evret_core.sdk import (
    EvretError,
    JudgmentContext,
    Metric,
    RankedBatch,
    Recipe,
    RewriteRequest,
    batch_retrieve,
    grade_chunk,
    judge_chunk,
    metric_values,
    rebuild,
    rewrite_chunk,
)


def build(made: Recipe) -> Any:
    """The part ``made`` describes (:func:`~evret_core.sdk.rebuild`); an object that was not made by name arrives
    as a reference to its pickle in the object store (a reference nested in the recipe is not resolved by Ray, so
    the worker fetches it)."""
    if not made.by_name and isinstance(made.part, ray.ObjectRef):
        import cloudpickle

        return cloudpickle.loads(ray.get(made.part))
    try:
        return rebuild(made)
    except EvretError as exc:
        if not made.by_name:
            raise
        raise EvretError(f"ray worker: could not build {made.kind.replace('_', ' ')} {made.name!r} ({exc}); install "
                         f"the plugin that registers it on every node, or register it in the executor's "
                         f"worker_setup") from None


def install_limiter(limiter: Any) -> None:
    """Make the cluster-wide limiter bound every LLM client of this worker process, for the worker's life."""
    if limiter is None:
        return
    from evret_core.sdk import use_shared_limiter
    from evret_ray.limiter import LeasedLimiter

    scope = use_shared_limiter(LeasedLimiter(limiter))
    scope.__enter__()  # never left: the worker serves this limiter until it is killed
    _KEPT.append(scope)  # a collected scope would run its exit and uninstall the limiter


_KEPT: list[Any] = []


class JudgeWorker:
    """One judging worker, an async Ray actor: builds the judge once, then judges the batches it is given, several
    at once. A judge with ``abatch_judge`` (the LLM judge) runs on the actor's one event loop, so its client and
    connections live as long as the worker; any other judge runs one batch at a time in a thread. With a
    cluster-wide limiter, the worker's LLM clients acquire from it around every request. The driver scans the run's
    texts for prompt injections once (:meth:`~evret_ray.executor.RayExecutor.judge`), so this worker's judge does
    not."""

    def __init__(self, spec: Recipe, limiter: Any = None, setup: Callable[[], None] | None = None) -> None:
        if setup is not None:
            setup()
        self.judge = build(spec)
        if scans_on_driver(self.judge):  # an LLM judge: its scan is the driver's (one count, one WARNING)
            self.judge.injections = _NoScan()
        install_limiter(limiter)
        self._one_at_a_time: asyncio.Lock | None = None

    async def ready(self) -> bool:
        return True

    async def reset(self) -> None:
        """Start counting the judge's stats afresh (the start of a run)."""
        reset_stats = getattr(self.judge, "reset_stats", None)
        if callable(reset_stats):
            reset_stats()

    async def stats(self) -> dict[str, Any] | None:
        """The judge's stats since :meth:`reset`, or None when it keeps none."""
        stats = getattr(self.judge, "stats", None)
        return stats() if callable(stats) else None

    async def judge_batch(self, contexts: Sequence[JudgmentContext]) -> list[bool | None]:
        judge = self.judge
        abatch = getattr(judge, "abatch_judge", None)
        if callable(abatch):
            prepare = getattr(judge, "prepare", None)
            if callable(prepare):
                prepare(contexts)
            got = list(await abatch(contexts))
            if len(got) != len(contexts):
                raise EvretError(f"judge {judge!r} returned {len(got)} answers for {len(contexts)} contexts")
            return [None if a is None else bool(a) for a in got]
        if self._one_at_a_time is None:
            self._one_at_a_time = asyncio.Lock()
        async with self._one_at_a_time:  # a sync judge is not asked to be thread-safe
            return await asyncio.to_thread(self._sync_batch, contexts)

    def _sync_batch(self, contexts: Sequence[JudgmentContext]) -> list[bool | None]:
        prepare = getattr(self.judge, "prepare", None)
        if callable(prepare):  # e.g. encode every distinct text of the batch in one pass
            prepare(contexts)
        return judge_chunk(self.judge, contexts)


class GradeWorker(JudgeWorker):
    """One grading worker: a :class:`JudgeWorker` whose batches are graded (``batch_grade``), each batch's grades
    checked by :func:`~evret_core.sdk.grade_chunk` as the local executor checks them (one per context, None or
    within the judge's scale), so a bad grade is refused with the same error. A judge with ``abatch_grade`` (the
    ``relevance`` judge) runs several batches at once on the actor's event loop; any other grades one batch at a
    time in a thread. As a judging worker's, its judge leaves the injection scan to the driver."""


    async def grade_batch(self, contexts: Sequence[JudgmentContext]) -> list[float | None]:
        judge = self.judge
        abatch = getattr(judge, "abatch_grade", None)
        if callable(abatch):
            prepare = getattr(judge, "prepare", None)
            if callable(prepare):
                prepare(contexts)
            return grade_chunk(_Graded(judge, list(await abatch(contexts))), contexts)
        if self._one_at_a_time is None:
            self._one_at_a_time = asyncio.Lock()
        async with self._one_at_a_time:  # a sync judge is not asked to be thread-safe
            return await asyncio.to_thread(self._sync_grades, contexts)

    def _sync_grades(self, contexts: Sequence[JudgmentContext]) -> list[float | None]:
        prepare = getattr(self.judge, "prepare", None)
        if callable(prepare):  # e.g. encode every distinct text of the batch in one pass
            prepare(contexts)
        return grade_chunk(self.judge, contexts)


def scans_on_driver(judge: Any) -> bool:
    """Whether ``judge`` scans its texts for prompt injections (an LLM judge: ``injections`` and ``prepare``), a
    scan :meth:`~evret_ray.executor.RayExecutor.judge` and ``grade`` make in the driver, once for the run."""
    return hasattr(judge, "injections") and callable(getattr(judge, "prepare", None))


class _Graded:
    """A batch's grades, already made, for :func:`~evret_core.sdk.grade_chunk` to check as the judge's own (its
    scale and its name in the error)."""

    def __init__(self, judge: Any, grades: list[Any]) -> None:
        self.judge = judge
        self.grades = getattr(judge, "grades", None)
        self.answers = grades

    def batch_grade(self, contexts: Sequence[JudgmentContext]) -> list[Any]:
        return self.answers

    def __repr__(self) -> str:
        return repr(self.judge)


class _NoScan:
    """Stands in for an LLM judge's injection scan on a worker: the driver scans the run's texts (and reports them)
    once, so the worker flags nothing and counts nothing."""

    flagged = 0

    def reset(self) -> None:
        pass

    def add(self, texts: Any) -> list[dict[str, str]]:
        return []

    def stats(self) -> dict[str, Any]:
        return {}


class RewriteWorker:
    """One rewriting worker, an async Ray actor: builds the rewriter once, then rewrites the batches it is given. A
    rewriter with ``abatch_rewrite`` (the LLM rewriter) runs several batches at once on the actor's one event loop;
    any other runs one batch at a time in a thread. The driver scans the run's messages for injections."""

    def __init__(self, spec: Recipe, limiter: Any = None, setup: Callable[[], None] | None = None) -> None:
        if setup is not None:
            setup()
        self.rewriter = build(spec)
        if hasattr(self.rewriter, "scan_here"):  # RayExecutor.rewrite scans every message of the run once
            self.rewriter.scan_here = False
        install_limiter(limiter)
        self._one_at_a_time: asyncio.Lock | None = None

    async def ready(self) -> bool:
        return True

    async def reset(self) -> None:
        """Start counting the rewriter's stats afresh (the start of a run)."""
        reset_stats = getattr(self.rewriter, "reset_stats", None)
        if callable(reset_stats):
            reset_stats()

    async def stats(self) -> dict[str, Any] | None:
        """The rewriter's stats since :meth:`reset`, or None when it keeps none."""
        stats = getattr(self.rewriter, "stats", None)
        return stats() if callable(stats) else None

    async def rewrite_batch(self, requests: Sequence[RewriteRequest]) -> list[str | None]:
        abatch = getattr(self.rewriter, "abatch_rewrite", None)
        if callable(abatch):
            return rewrite_chunk(_Answered(self.rewriter, list(await abatch(requests))), requests)
        if self._one_at_a_time is None:
            self._one_at_a_time = asyncio.Lock()
        async with self._one_at_a_time:  # a sync rewriter is not asked to be thread-safe
            return await asyncio.to_thread(rewrite_chunk, self.rewriter, requests)


class _Answered:
    """A batch's answers, already made, for :func:`~evret_core.sdk.rewrite_chunk` to check as the rewriter's own."""

    def __init__(self, rewriter: Any, answers: list[Any]) -> None:
        self.rewriter = rewriter
        self.answers = answers

    def batch_rewrite(self, requests: Sequence[RewriteRequest]) -> list[Any]:
        return self.answers

    def __repr__(self) -> str:
        return repr(self.rewriter)


class RetrieveWorker:
    """One retrieval worker: builds (or receives) the retriever once, then retrieves the batches it is given."""

    def __init__(self, spec: Recipe, setup: Callable[[], None] | None = None) -> None:
        if setup is not None:
            setup()
        self.retriever = build(spec)

    def ready(self) -> bool:
        return True

    def retrieve_batch(self, texts: list[str], k: int) -> list[Any]:
        return batch_retrieve(self.retriever, texts, k)


class GenerateWorker:
    """One generation worker, an async Ray actor: rebuilds the RAG harness's parts (generator, claim judge,
    answer relevance) once from their recipes, into the driver's runner class (``runner_cls``, pickled by
    reference: :meth:`~evret_core.rag.pipeline.Runner.from_recipes`), then runs chunks of requests through it,
    several at once on its one event loop (their LLM calls share the worker's clients and, with a limiter, the
    cluster-wide bound)."""

    def __init__(self, runner_cls: Any, recipes: dict[str, Recipe], pipelined: bool, limiter: Any = None,
                 setup: Callable[[], None] | None = None) -> None:
        if setup is not None:
            setup()
        self.runner = runner_cls.from_recipes(recipes, pipelined=pipelined, build=build)
        for part in self.runner.parts().values():
            if hasattr(part, "scan_here"):  # the driver scans the run's contexts once (RayExecutor.generate)
                part.scan_here = False
        install_limiter(limiter)

    async def ready(self) -> bool:
        return True

    async def reset(self) -> None:
        for part in self.runner.parts().values():
            reset_stats = getattr(part, "reset_stats", None)
            if callable(reset_stats):
                reset_stats()

    async def stats(self) -> dict[str, dict[str, Any]]:
        """Each LLM part's stats since :meth:`reset`, by role."""
        return {role: part.stats() for role, part in self.runner.parts().items()
                if callable(getattr(part, "clients", None)) and callable(getattr(part, "stats", None))}

    async def generate(self, requests: dict[Any, Any]) -> dict[Any, Any]:
        outcomes: dict[Any, Any] = await self.runner.arun(requests, close=False)
        return outcomes


@ray.remote
def metrics_task(metrics: Sequence[Metric], batch: RankedBatch) -> list[np.ndarray]:
    return metric_values(metrics, batch)


__all__ = ["GenerateWorker", "GradeWorker", "JudgeWorker", "RetrieveWorker", "RewriteWorker", "build", "install_limiter",
           "metrics_task", "scans_on_driver"]
