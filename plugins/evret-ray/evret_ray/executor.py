"""``RayExecutor``: an evaluation's retrieval batches, judging and metric chunks as Ray tasks and actors.

- **Judging**: the distinct contexts are cut into batches (``judge_batch_size``) and spread over ``workers``
  actors. Each actor builds the judge once from the name and options it was created with
  (:func:`evret_core.registry.recipe`: an embedding model is loaded on the worker, never pickled), or receives a
  judge object that was not made by name. The judge's answer cache (SQLite, WAL) is the same file on every worker
  of one machine or a shared filesystem, so answers paid for by a killed run are reused by the next.
- **LLM calls** obey ``max_in_flight``: one cluster-wide bound on requests in flight, held by an
  :class:`~evret_ray.limiter.InFlightActor` that every worker's LLM client acquires from.
- **Metrics**: one task per chunk of queries, at most ``2 x workers`` chunks out at once (no worker, and not the
  driver's queue, holds every query's arrays); per-query values are concatenated in order: exact.
- **Retrieval**: batches spread over ``workers`` actors; each rebuilds a retriever made by name (``bm25`` indexes
  its corpus once per worker) or receives a retriever object (pickled). With ``retrieve_on_cluster=False`` (an
  object that cannot be pickled, or a retriever bound to a service only this machine reaches) it runs here.

Results equal the ``local`` executor's: only where the work runs changes.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
from ray.util import ActorPool

from evret_core.errors import EvretError
from evret_core.executors import Executor, JudgeRun
from evret_core.metrics.base import Metric, RankedBatch
from evret_core.models import JudgmentContext

os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # never phone home unless the user asked for it


class RayExecutor(Executor):
    """Runs the stages on Ray (see the module).

    :param address: the cluster to join (``"auto"``, ``"ray://host:10001"``...). Default: the Ray this process
        already initialised, else a local one started here.
    :param workers: judging actors (default: the cluster's CPUs, at least 1).
    :param worker_cpus: CPUs each judging actor reserves (0 for I/O-bound LLM judging, so that more actors
        than cores can wait on the network).
    :param worker_gpus: GPUs each judging actor reserves (an embedding judge on GPU workers).
    :param max_in_flight: one cluster-wide bound on LLM requests in flight (default: none beyond each worker's
        own ``max_concurrency``).
    :param retrieve_on_cluster: run retrieval batches on the cluster (default) or in this process.
    :param worker_setup: a function each worker runs first, e.g. registering a plugin object that is not an
        installed entry point.
    :param init_options: more ``ray.init`` keywords when this executor starts or joins Ray (``runtime_env``...).
    """

    name = "ray"

    def __init__(
        self,
        address: str | None = None,
        workers: int | None = None,
        worker_cpus: float = 1.0,
        worker_gpus: float = 0.0,
        max_in_flight: int | None = None,
        retrieve_on_cluster: bool = True,
        worker_setup: Callable[[], None] | None = None,
        init_options: dict[str, Any] | None = None,
    ) -> None:
        if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
            raise EvretError(f"executor 'ray': option 'workers' must be a positive integer, got {workers!r}")
        if max_in_flight is not None and (isinstance(max_in_flight, bool) or not isinstance(max_in_flight, int)
                                          or max_in_flight < 1):
            raise EvretError(f"executor 'ray': option 'max_in_flight' must be a positive integer, got "
                             f"{max_in_flight!r}")
        for option, value in (("worker_cpus", worker_cpus), ("worker_gpus", worker_gpus)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1e6:
                raise EvretError(f"executor 'ray': option {option!r} must be a number >= 0, got {value!r}")
        if worker_setup is not None and not callable(worker_setup):
            raise EvretError("executor 'ray': option 'worker_setup' must be a function")
        self.address = address
        self.workers = workers
        self.worker_cpus = float(worker_cpus)
        self.worker_gpus = float(worker_gpus)
        self.max_in_flight = max_in_flight
        self.retrieve_on_cluster = bool(retrieve_on_cluster)
        self.worker_setup = worker_setup
        self.init_options = dict(init_options or {})
        self.started_ray = False
        self.last_limiter_stats: dict[str, int] | None = None

    # -- cluster ---------------------------------------------------------------------------------------------
    def _ray(self) -> Any:
        import ray

        if not ray.is_initialized():
            options = {"include_dashboard": False, "log_to_driver": True, **self.init_options}
            try:
                ray.init(address=self.address, **options)
            except (ConnectionError, RuntimeError, ValueError) as exc:
                raise EvretError(f"executor 'ray': could not start or join Ray at "
                                 f"{self.address or 'a new local cluster'}: {exc}") from None
            self.started_ray = True
        return ray

    def worker_count(self) -> int:
        """The judging actors a run uses."""
        if self.workers is not None:
            return self.workers
        cpus = self._ray().cluster_resources().get("CPU", 1.0)
        return max(1, int(cpus))

    def shutdown(self) -> None:
        """Stop Ray if this executor started it (a cluster it joined keeps running)."""
        if self.started_ray:
            import ray

            ray.shutdown()
            self.started_ray = False

    # -- stages ----------------------------------------------------------------------------------------------
    def retrieve(self, retriever: Any, batches: Sequence[list[str]], k: int,
                 progress: Callable[[int], None]) -> list[list[Any]]:
        if not self.retrieve_on_cluster:
            return super().retrieve(retriever, batches, k, progress)
        ray = self._ray()
        from evret_ray.workers import RetrieveWorker

        spec = spec_of(retriever, "retriever")
        if spec[0] == "object":
            try:
                spec = ("object", ray.put(retriever), {})
            except Exception as exc:  # what cannot be pickled says so in many ways
                first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                raise EvretError(f"executor 'ray': retriever {type(retriever).__name__} was not made by name and "
                                 f"cannot be sent to the workers ({first}); pass executor option "
                                 f"retrieve_on_cluster=false to retrieve in this process") from None
        n = min(self.worker_count(), len(batches))
        actor = ray.remote(RetrieveWorker).options(num_cpus=self.worker_cpus, num_gpus=self.worker_gpus)
        actors = [actor.remote(spec, self.worker_setup) for _ in range(n)]
        out: list[list[Any]] = []
        done = 0
        with _errors_as_evret(ray):
            try:
                pool = ActorPool(actors)
                for texts, got in zip(batches, pool.map(lambda a, t: a.retrieve_batch.remote(t, k), list(batches)),
                                      strict=True):
                    out.append(got)
                    done += len(texts)
                    progress(done)
            finally:
                for a in actors:
                    ray.kill(a)
        return out

    def judge(self, judge: Any, contexts: Sequence[JudgmentContext], batch_size: int,
              progress: Callable[[int], None]) -> JudgeRun:
        ray = self._ray()
        from evret_ray.limiter import start_limiter
        from evret_ray.workers import JudgeWorker

        spec = spec_of(judge, "judge")
        batches = [list(contexts[i : i + batch_size]) for i in range(0, len(contexts), batch_size)]
        n = min(self.worker_count(), len(batches))
        limiter = start_limiter(self.max_in_flight) if self.max_in_flight is not None else None
        actor = ray.remote(JudgeWorker).options(num_cpus=self.worker_cpus, num_gpus=self.worker_gpus)
        actors = [actor.remote(spec, limiter, self.worker_setup) for _ in range(n)]
        verdicts: list[bool | None] = []
        stats: dict[str, Any] | None = None
        with _errors_as_evret(ray):
            try:
                pool = ActorPool(actors)
                for got, got_stats in pool.map(lambda a, batch: a.judge_batch.remote(batch), batches):
                    verdicts.extend(got)
                    if got_stats is not None:
                        stats = got_stats if stats is None else merge_stats(stats, got_stats)
                    progress(len(verdicts))
                if limiter is not None:
                    self.last_limiter_stats = ray.get(limiter.stats.remote())
            finally:
                for a in actors:
                    ray.kill(a)
                if limiter is not None:
                    ray.kill(limiter)
        return JudgeRun(verdicts, stats)

    def metrics(self, metrics: Sequence[Metric], batches: Iterable[RankedBatch]) -> dict[str, np.ndarray]:
        ray = self._ray()
        from evret_ray.workers import metrics_task

        shared = ray.put(list(metrics))
        parts: list[list[np.ndarray]] = [[] for _ in metrics]
        for values in self._bounded(ray, (metrics_task.remote(shared, b) for b in batches)):
            for part, v in zip(parts, values, strict=True):
                part.append(v)
        return {m.name: np.concatenate(p) if p else np.zeros(0) for m, p in zip(metrics, parts, strict=True)}

    def map_shards(self, fn: Callable[..., Any], tasks: Sequence[tuple[Any, ...]]) -> Iterator[Any]:
        """Run-file shards that the workers read themselves (:mod:`evret_ray.shards`)."""
        from evret_ray.shards import map_shards

        return map_shards(self, fn, tasks)

    def _bounded(self, ray: Any, refs: Iterator[Any]) -> Iterator[Any]:
        """Results of ``refs`` in order, with at most ``2 x workers`` submitted and not yet collected."""
        window = 2 * self.worker_count()
        pending: list[Any] = []
        for ref in refs:
            pending.append(ref)
            if len(pending) >= window:
                yield ray.get(pending.pop(0))
        for ref in pending:
            yield ray.get(ref)

    def config(self) -> dict[str, Any]:
        return {"name": self.name, "address": self.address, "workers": self.workers,
                "max_in_flight": self.max_in_flight}


def spec_of(obj: Any, kind: str) -> tuple[str, Any, dict[str, Any]]:
    """How a worker gets ``obj`` (a judge or a retriever): rebuilt from its registered name and options (a judge's
    answer cache pinned to the file the driver's judge uses), or, for an object not made by name, the object."""
    from evret_core.llm.cache import JudgmentCache
    from evret_core.registry import recipe

    made = recipe(obj)
    if made is None or made[0] != kind:
        return ("object", obj, {})
    options = dict(made[2])
    cache = getattr(obj, "cache", None)
    if kind == "judge" and isinstance(cache, JudgmentCache):
        options["cache"] = str(cache.path)
    return (kind, made[1], options)


@contextmanager
def _errors_as_evret(ray: Any) -> Iterator[None]:
    """A user error raised on a worker (an :class:`EvretError`) reads as it would have here."""
    try:
        yield
    except (ray.exceptions.RayTaskError, ray.exceptions.RayActorError) as exc:
        cause = getattr(exc, "cause", None)
        if isinstance(cause, EvretError):
            raise EvretError(str(cause)) from None
        raise


def merge_stats(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Two batches' judge stats as one: numbers added, nested dicts merged, other values kept from ``a``."""
    out = dict(a)
    for key, value in b.items():
        mine = out.get(key)
        if isinstance(mine, dict) and isinstance(value, dict):
            out[key] = merge_stats(mine, value)
        elif (isinstance(mine, (int, float)) and isinstance(value, (int, float))
              and not isinstance(mine, bool) and not isinstance(value, bool)):
            out[key] = mine + value
        elif key not in out:
            out[key] = value
    return out


__all__ = ["RayExecutor", "merge_stats", "spec_of"]
