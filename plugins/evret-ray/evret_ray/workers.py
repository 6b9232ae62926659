"""What runs inside Ray workers: the judging actor (builds its judge once) and the retrieval and metric tasks."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import ray

from evret_core.errors import EvretError
from evret_core.executors import batch_retrieve, judge_chunk, metric_values
from evret_core.metrics.base import Metric, RankedBatch
from evret_core.models import JudgmentContext

Spec = tuple[str, Any, dict[str, Any]]
"""``("judge" | "retriever", name, options)``: build with the registry's ``create_<kind>(name, **options)``;
``("object", obj, {})``: an object that was not made by name, sent as it is (pickled)."""


def build(spec: Spec) -> Any:
    how, what, options = spec
    if how == "object":  # sent as it is, or put in the object store once for every worker (nested: not resolved)
        return ray.get(what) if isinstance(what, ray.ObjectRef) else what
    from evret_core import registry

    try:
        return registry.create_judge(what, **options) if how == "judge" else registry.create_retriever(
            what, **options)
    except EvretError as exc:
        raise EvretError(f"ray worker: could not build {how} {what!r} ({exc}); install the plugin that "
                         f"registers it on every node, or register it in the executor's worker_setup") from None


class JudgeWorker:
    """One judging worker: builds the judge once, then judges the batches it is given. With a cluster-wide
    limiter, the worker's LLM clients acquire from it around every request."""

    def __init__(self, spec: Spec, limiter: Any = None, setup: Callable[[], None] | None = None) -> None:
        if setup is not None:
            setup()
        self.judge = build(spec)
        self.limiter = None
        if limiter is not None:
            from evret_ray.limiter import RayInFlightLimiter

            self.limiter = RayInFlightLimiter(limiter)

    def judge_batch(self, contexts: Sequence[JudgmentContext]) -> tuple[list[bool | None], dict[str, Any] | None]:
        """Verdicts on ``contexts`` and the judge's stats for them alone."""
        from evret_core.llm import use_shared_limiter

        judge = self.judge
        reset_stats = getattr(judge, "reset_stats", None)
        if callable(reset_stats):
            reset_stats()
        scope = use_shared_limiter(self.limiter) if self.limiter is not None else contextlib.nullcontext()
        with scope:
            prepare = getattr(judge, "prepare", None)
            if callable(prepare):
                prepare(contexts)
            verdicts = judge_chunk(judge, contexts)
        stats = getattr(judge, "stats", None)
        return verdicts, (stats() if callable(stats) else None)


class RetrieveWorker:
    """One retrieval worker: builds (or receives) the retriever once, then retrieves the batches it is given."""

    def __init__(self, spec: Spec, setup: Callable[[], None] | None = None) -> None:
        if setup is not None:
            setup()
        self.retriever = build(spec)

    def retrieve_batch(self, texts: list[str], k: int) -> list[Any]:
        return batch_retrieve(self.retriever, texts, k)


@ray.remote
def metrics_task(metrics: Sequence[Metric], batch: RankedBatch) -> list[np.ndarray]:
    return metric_values(metrics, batch)
