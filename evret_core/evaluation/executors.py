"""Executors: where the expensive stages of an evaluation run.

The :class:`~evret_core.evaluation.evaluator.Evaluator` plans its work (retrieval batches, judgment chunks,
metric chunks) and hands each stage to an executor: :class:`LocalExecutor` (``"local"``, the default) runs it
in this process, one chunk after another; a plugin registers other engines through the ``register_executors``
hook (evret-ray runs the stages on a Ray cluster). Every executor must give the same answers as the local one:
only where the work runs changes, never what is computed.

The three stages an executor runs:

- :meth:`Executor.retrieve`: ``batch_retrieve`` (or ``batch_retrieve_columns``) over batches of query texts;
- :meth:`Executor.judge`: the judge over chunks of distinct judgment contexts, returning the verdicts and the
  judge's own ``stats()`` for the run (cost, cache hits, parse fallbacks) when it keeps any;
- :meth:`Executor.metrics`: each metric over :class:`~evret_core.contracts.metric.RankedBatch` chunks of queries.
  Per-query values are independent, so concatenating the chunks' values is exact.

The in-process stages call plugin code under :func:`~evret_core.plugins.loading.plugin_exits_as_errors`: a plugin's
``sys.exit()`` there is a ``PluginError`` naming it, never the end of the process.

The RAG harness (:class:`~evret_core.rag.RagEvaluator`) adds a fourth:

- :meth:`Executor.generate`: generation, claim judging and answer relevance for every (condition, question)
  request, through a :class:`~evret_core.rag.pipeline.Runner` (the local executor runs it here, pipelined as
  always); the parts' own ``stats()`` come back when they ran elsewhere.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from evret_core.contracts.errors import EvretError
from evret_core.contracts.judge import JudgmentContext
from evret_core.contracts.metric import Metric, RankedBatch
from evret_core.plugins.loading import plugin_exits_as_errors

__all__ = ["Executor", "GenerateRun", "JudgeRun", "LocalExecutor", "batch_retrieve", "judge_chunk", "metric_values",
           "resolve_executor"]

Progress = Callable[[int], None]
"""Called with how many items (queries, contexts) are done so far."""


@dataclass
class JudgeRun:
    """What :meth:`Executor.judge` returns: one verdict per context (None: unmeasured) and the judge's
    ``stats()`` for this run, or None when the judge keeps none."""

    verdicts: list[bool | None]
    stats: dict[str, Any] | None = None


@dataclass
class GenerateRun:
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
        with plugin_exits_as_errors():
            for texts in batches:
                out.append(batch_retrieve(retriever, texts, k))
                done += len(texts)
                progress(done)
        return out

    def judge(self, judge: Any, contexts: Sequence[JudgmentContext], batch_size: int, progress: Progress) -> JudgeRun:
        """The judge's verdict on every context, in order, judged ``batch_size`` contexts at a time."""
        with plugin_exits_as_errors():
            reset_stats = getattr(judge, "reset_stats", None)
            if callable(reset_stats):  # judges that count cost (LLMJudge) report per run
                reset_stats()
            prepare = getattr(judge, "prepare", None)
            if callable(prepare):  # e.g. encode every distinct text in one pass before chunked judging
                prepare(contexts)
            verdicts: list[bool | None] = []
            for start in range(0, len(contexts), batch_size):
                verdicts.extend(judge_chunk(judge, contexts[start : start + batch_size]))
                progress(len(verdicts))
            stats = getattr(judge, "stats", None)
            return JudgeRun(verdicts, stats() if callable(stats) else None)

    def metrics(self, metrics: Sequence[Metric], batches: Iterable[RankedBatch]) -> dict[str, np.ndarray]:
        """Each metric's per-query values over all ``batches``, concatenated in order."""
        parts: list[list[np.ndarray]] = [[] for _ in metrics]
        with plugin_exits_as_errors():
            for batch in batches:
                for part, values in zip(parts, metric_values(metrics, batch), strict=True):
                    part.append(values)
        return {m.name: np.concatenate(p) if p else np.zeros(0) for m, p in zip(metrics, parts, strict=True)}

    def generate(self, runner: Any, requests: dict[Any, Any], progress: Progress) -> GenerateRun:
        """Every request's outcome: ``runner.run(requests)`` here (a :class:`~evret_core.rag.pipeline.Runner`
        over ``{(condition, question index): GenerationRequest}``)."""
        with plugin_exits_as_errors():
            outcomes = runner.run(requests)
        progress(len(outcomes))
        return GenerateRun(outcomes)

    def config(self) -> dict[str, Any]:
        """What the results' manifest records about the executor (never a secret)."""
        return {"name": self.name}


class LocalExecutor(Executor):
    """Runs every stage in this process, chunk after chunk: Evret's behaviour without a plugin."""


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


def metric_values(metrics: Sequence[Metric], batch: RankedBatch) -> list[np.ndarray]:
    """Each metric's per-query values on one batch."""
    return [np.asarray(m.compute(batch), dtype=np.float64) for m in metrics]


def resolve_executor(executor: Any, options: dict[str, Any] | None = None) -> Executor:
    """An executor object as is, or the one registered under a name (``"local"``, ``"ray"``...) built with
    ``options``."""
    if executor is None:
        executor = "local"
    if isinstance(executor, str):
        from evret_core.plugins.registry import create_executor

        built = create_executor(executor, **(options or {}))
        if not isinstance(built, Executor):
            raise EvretError(f"executor {executor!r}: its factory returned {type(built).__name__}, not an Executor")
        return built
    if options:
        raise EvretError("executor_options apply to an executor given by name, not to an Executor object")
    if not isinstance(executor, Executor):
        raise EvretError(f"executor must be a registered name or an Executor, got {type(executor).__name__}")
    return executor


async def _await(awaitable: Any) -> Any:
    return await awaitable
