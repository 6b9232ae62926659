"""The executor contract: where the expensive stages of an evaluation run.

The :class:`~evret_core.evaluation.evaluator.Evaluator` plans its work (retrieval batches, judgment chunks,
metric chunks) and hands each stage to an executor: :class:`~evret_core.evaluation.executors.LocalExecutor`
(``"local"``, the default) runs it in this process, one chunk after another; a plugin registers other engines
through the ``register_executors`` hook (evret-ray runs the stages on a Ray cluster). Every executor must give the
same answers as the local one: only where the work runs changes, never what is computed.

The stages an executor runs:

- :meth:`Executor.retrieve`: ``batch_retrieve`` (or ``batch_retrieve_columns``) over batches of query texts;
- :meth:`Executor.judge`: the judge over chunks of distinct judgment contexts, returning the verdicts and the
  judge's own ``stats()`` for the run (cost, cache hits, parse fallbacks) when it keeps any;
  :meth:`Executor.grade` does the same for a graded judge (:attr:`~evret_core.contracts.judge.Judge.grades`),
  returning its grades beside the verdicts they give;
- :meth:`Executor.rewrite`: a conversation run's rewriter (the ``rewriter`` query form) over chunks of
  :class:`~evret_core.contracts.conversation.RewriteRequest` s, returning one query text (or None) per request;
- :meth:`Executor.metrics`: each metric over :class:`~evret_core.contracts.metric.RankedBatch` chunks of queries.
  Per-query values are independent, so concatenating the chunks' values is exact.

The callers of the stages (the evaluator, the RAG harness) run them under
:func:`~evret_core.plugins.loading.plugin_exits_as_errors`: a plugin's ``sys.exit()`` there is a ``PluginError``
naming it, never the end of the process.

The RAG harness (:class:`~evret_core.rag.RagEvaluator`) adds a fourth:

- :meth:`Executor.generate`: generation, claim judging and answer relevance for every (condition, question)
  request, through a :class:`~evret_core.rag.pipeline.Runner` (the local executor runs it here, pipelined as
  always); the parts' own ``stats()`` come back when they ran elsewhere.

An :class:`InFlightLimiter` bounds the calls in flight of many LLM clients at once: several processes, or every
worker of a cluster (evret-ray installs one backed by a Ray actor in each worker with :func:`use_shared_limiter`).
numpy is imported inside the functions that compute, so importing this module loads none.
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from evret_core.contracts.conversation import RewriteRequest
from evret_core.contracts.errors import EvretError
from evret_core.contracts.judge import JudgmentContext
from evret_core.contracts.metric import Metric, RankedBatch
from evret_core.contracts.values import Value, value_type

if TYPE_CHECKING:
    import numpy as np

__all__ = ["Executor", "GenerateRun", "InFlightLimiter", "JudgeRun", "Progress", "RewriteRun", "batch_retrieve",
           "grade_chunk", "judge_chunk", "metric_values", "rewrite_chunk", "shared_limiter", "use_shared_limiter",
           "verdict_of"]

T = TypeVar("T")
R = TypeVar("R")

Progress = Callable[[int], None]
"""Called with how many items (queries, contexts) are done so far."""


@value_type
class JudgeRun(Value):
    """What :meth:`Executor.judge` returns: one verdict per context (None: unmeasured) and the judge's
    ``stats()`` for this run, or None when the judge keeps none. :meth:`Executor.grade` also fills ``grades``
    (one per context, None: unmeasured); the verdicts are then the grades at the judge's cut."""

    verdicts: list[bool | None]
    stats: dict[str, Any] | None = None
    grades: list[float | None] | None = None


@value_type
class RewriteRun(Value):
    """What :meth:`Executor.rewrite` returns: one query text per request (None: the rewriter could not make one)
    and the rewriter's ``stats()`` for this run, or None when it keeps none."""

    texts: list[str | None]
    stats: dict[str, Any] | None = None


@value_type
class GenerateRun(Value):
    """What :meth:`Executor.generate` returns: the :class:`~evret_core.rag.pipeline.Outcome` of every request
    (keyed and ordered as the requests), and, when the parts ran elsewhere, each LLM part's ``stats()`` for this
    run by role (``generator``, ``claim_judge``, ``relevance``); None when the driver's own parts did the work."""

    outcomes: dict[Any, Any]
    stats: dict[str, dict[str, Any]] | None = None


class Executor:
    """The interface of an execution engine (see the module). Subclasses override the three stages; the
    defaults here run in-process, so a partial engine stays correct."""

    name = "local"

    def retrieve(self, retriever: Any, batches: Sequence[list[str]], k: int, progress: Progress) -> list[list[Any]]:
        """Each batch's raw result lists (one per query text), in order."""
        out: list[list[Any]] = []
        done = 0
        for texts in batches:
            out.append(batch_retrieve(retriever, texts, k))
            done += len(texts)
            progress(done)
        return out

    def judge(self, judge: Any, contexts: Sequence[JudgmentContext], batch_size: int, progress: Progress) -> JudgeRun:
        """The judge's verdict on every context, in order, judged ``batch_size`` contexts at a time."""
        _start_run(judge, contexts)
        verdicts = _in_chunks(lambda chunk: judge_chunk(judge, chunk), contexts, batch_size, progress)
        return JudgeRun(verdicts, _run_stats(judge))

    def grade(self, judge: Any, contexts: Sequence[JudgmentContext], batch_size: int, progress: Progress) -> JudgeRun:
        """The judge's grade on every context, in order, graded ``batch_size`` contexts at a time, with the
        verdicts they give (:func:`verdict_of`). An engine that only overrides :meth:`judge` grades here."""
        _start_run(judge, contexts)
        grades = _in_chunks(lambda chunk: grade_chunk(judge, chunk), contexts, batch_size, progress)
        return JudgeRun([verdict_of(judge, g) for g in grades], _run_stats(judge), grades)

    def rewrite(self, rewriter: Any, requests: Sequence[RewriteRequest], batch_size: int,
                progress: Progress) -> RewriteRun:
        """The rewriter's query text for every request, in order, ``batch_size`` requests at a time."""
        _start_run(rewriter, requests)
        texts = _in_chunks(lambda chunk: rewrite_chunk(rewriter, chunk), requests, batch_size, progress)
        return RewriteRun(texts, _run_stats(rewriter))

    def metrics(self, metrics: Sequence[Metric], batches: Iterable[RankedBatch]) -> dict[str, np.ndarray]:
        """Each metric's per-query values over all ``batches``, concatenated in order."""
        import numpy as np

        parts: list[list[np.ndarray]] = [[] for _ in metrics]
        for batch in batches:
            for part, values in zip(parts, metric_values(metrics, batch), strict=True):
                part.append(values)
        return {m.name: np.concatenate(p) if p else np.zeros(0) for m, p in zip(metrics, parts, strict=True)}

    def generate(self, runner: Any, requests: dict[Any, Any], progress: Progress) -> GenerateRun:
        """Every request's outcome: ``runner.run(requests)`` here (a :class:`~evret_core.rag.pipeline.Runner`
        over ``{(condition, question index): GenerationRequest}``)."""
        outcomes = runner.run(requests)
        progress(len(outcomes))
        return GenerateRun(outcomes)

    def config(self) -> dict[str, Any]:
        """What the results' manifest records about the executor (never a secret)."""
        return {"name": self.name}


def batch_retrieve(retriever: Any, texts: list[str], k: int) -> list[Any]:
    """One retrieval batch: ``batch_retrieve_columns`` when the retriever has it (awaited when it is async), else
    its result lists."""
    from evret_core.contracts.retrieve import call_batch_retrieve

    columns = getattr(retriever, "batch_retrieve_columns", None)
    if columns is None:  # a duck-typed retriever or an adapted foreign object: its result lists
        return list(call_batch_retrieve(retriever, texts, k))
    got = columns(texts, k)
    if inspect.isawaitable(got):
        from evret_core.contracts.aio import run_sync

        got = run_sync(_await(got))
    return list(got)


def judge_chunk(judge: Any, chunk: Sequence[JudgmentContext]) -> list[bool | None]:
    """``judge.batch_judge(chunk)`` checked for length, with every verdict a bool or None."""
    got = list(judge.batch_judge(chunk))
    if len(got) != len(chunk):
        raise EvretError(f"judge {judge!r} returned {len(got)} answers for {len(chunk)} contexts")
    return [None if a is None else bool(a) for a in got]


def grade_chunk(judge: Any, chunk: Sequence[JudgmentContext]) -> list[float | None]:
    """``judge.batch_grade(chunk)`` checked: one answer per context, each None or a finite number in
    [0, ``judge.grades``] (a judge without ``grades``: [0, 1])."""
    got = list(judge.batch_grade(chunk))
    if len(got) != len(chunk):
        raise EvretError(f"judge {judge!r} returned {len(got)} grades for {len(chunk)} contexts")
    top = getattr(judge, "grades", None) or 1
    out: list[float | None] = []
    for grade in got:
        if grade is None:
            out.append(None)
            continue
        if isinstance(grade, bool) or not isinstance(grade, (int, float)) or not 0 <= float(grade) <= top:
            raise EvretError(f"judge {judge!r} returned the grade {grade!r}, outside its scale 0..{top}")
        out.append(float(grade))
    return out


def rewrite_chunk(rewriter: Any, chunk: Sequence[RewriteRequest]) -> list[str | None]:
    """``rewriter.batch_rewrite(chunk)`` checked: one answer per request, each a string or None; a blank string is
    None (no query was made)."""
    got = list(rewriter.batch_rewrite(chunk))
    if len(got) != len(chunk):
        raise EvretError(f"rewriter {rewriter!r} returned {len(got)} answers for {len(chunk)} requests")
    out: list[str | None] = []
    for text in got:
        if text is not None and not isinstance(text, str):
            raise EvretError(f"rewriter {rewriter!r} returned {type(text).__name__} {text!r}; a rewrite is a string "
                             f"or None")
        out.append(text if text is not None and text.strip() else None)
    return out


def verdict_of(judge: Any, grade: float | None) -> bool | None:
    """The verdict a grade gives: grade >= ``judge.cut``, or grade > 0 for a judge without a cut."""
    if grade is None:
        return None
    cut = getattr(judge, "cut", None)
    return grade >= cut if cut is not None else grade > 0


def _in_chunks(call: Callable[[Sequence[T]], list[R]], items: Sequence[T], batch_size: int,
               progress: Progress) -> list[R]:
    """``call`` on ``items`` ``batch_size`` at a time, the answers concatenated in order; ``progress`` is told how
    many are done after each chunk."""
    out: list[R] = []
    for start in range(0, len(items), batch_size):
        out.extend(call(items[start : start + batch_size]))
        progress(len(out))
    return out


def _start_run(judge: Any, contexts: Sequence[Any]) -> None:
    reset_stats = getattr(judge, "reset_stats", None)
    if callable(reset_stats):  # judges that count cost (LLMJudge) report per run
        reset_stats()
    prepare = getattr(judge, "prepare", None)
    if callable(prepare):  # e.g. encode every distinct text in one pass before chunked judging
        prepare(contexts)


def _run_stats(judge: Any) -> dict[str, Any] | None:
    stats = getattr(judge, "stats", None)
    return stats() if callable(stats) else None


def metric_values(metrics: Sequence[Metric], batch: RankedBatch) -> list[np.ndarray]:
    """Each metric's per-query values on one batch."""
    import numpy as np

    return [np.asarray(m.compute(batch), dtype=np.float64) for m in metrics]


class InFlightLimiter(Protocol):
    """A bound on calls in flight shared by several clients (processes, cluster workers).

    ``await acquire()`` waits for a slot; ``release()`` gives it back and must not block (it is called from
    ``finally`` blocks, cancelled calls included). An implementation must give back a slot whose ``acquire`` was
    cancelled after the slot was granted."""

    async def acquire(self) -> None: ...

    def release(self) -> None: ...


_shared: InFlightLimiter | None = None
_shared_lock = threading.Lock()


def shared_limiter() -> InFlightLimiter | None:
    """The limiter every client of this process obeys besides its own bounds, or None."""
    return _shared


@contextmanager
def use_shared_limiter(limiter: InFlightLimiter | None) -> Iterator[None]:
    """Make ``limiter`` bound the calls of every :class:`~evret_core.llm.client.LLMClient` of this process
    (clients made before and after) while the block runs; the previous one is restored after."""
    global _shared
    with _shared_lock:
        previous, _shared = _shared, limiter
    try:
        yield
    finally:
        with _shared_lock:
            _shared = previous


async def _await(awaitable: Any) -> Any:
    return await awaitable
