"""``RayExecutor``: an evaluation's retrieval batches, judging, grading, rewriting and metric chunks as Ray actors
and tasks.

- **Workers are kept.** The actors of a stage (judging, retrieval) are started once, all at once, and kept across
  stages and across runs of the same executor, keyed by how the part is built: the judge's (or retriever's)
  registered name and options, or the digest of the pickled object. A part that changes gets new workers (the
  old ones are killed); a worker that died is replaced at the next stage; a failed stage kills them all;
  :meth:`RayExecutor.shutdown` kills them. An idle pool that holds CPUs or GPUs another stage needs is killed.
- **Judging**: the distinct contexts are cut into batches (``judge_batch_size``, smaller when that gives a worker
  fewer than eight) and spread over ``workers`` actors, up to ``batches_per_worker`` batches out on each:
  a worker starts its next batch as soon as one ends. Each actor builds the judge once from the name and options
  it was created with (its :class:`~evret_core.sdk.Recipe`, rebuilt by :func:`~evret_core.sdk.rebuild`: an
  embedding model is loaded on the worker, never pickled), or unpickles a judge object that was not made by
  name. An LLM judge's batches run concurrently on the actor's event loop (one client, its connections kept);
  other judges run one batch at a time. The judge's answer cache (SQLite, WAL) is the same file on every worker
  of one machine or a shared filesystem, so answers paid for by a killed run are reused by the next. An LLM
  judge's texts are scanned for injections in the driver, once for the run (its workers scan nothing). A
  ``cascade`` judge's LLM stages get the driver's cache file too; a cascade with a budgeted stage is refused
  before any work (each worker would count the budget alone).
- **Grading** (a graded judge, e.g. ``relevance``, over queries without labels or a judged pool): the same, each
  batch graded by ``batch_grade`` (``abatch_grade`` on the event loop) and checked on the worker as locally
  (:func:`~evret_core.sdk.grade_chunk`); the verdicts are the grades at the judge's cut, and an LLM judge's texts
  are scanned for injections in the driver, once for the run.
- **LLM calls** obey ``max_in_flight``: one cluster-wide bound on requests in flight, held by an
  :class:`~evret_ray.limiter.InFlightActor` that every worker's LLM client acquires from through a
  :class:`~evret_ray.limiter.LeasedLimiter` (slots leased in bulk and handed on inside a worker).
- **Metrics**: one task per chunk of queries, at most ``2 x workers`` chunks out at once (no worker, and not the
  driver's queue, holds every query's arrays); per-query values are concatenated in order: exact.
- **Retrieval**: batches spread over ``workers`` actors; each rebuilds a retriever made by name (``bm25`` indexes
  its corpus once per worker) or receives a retriever object (pickled). With ``retrieve_on_cluster=False`` (an
  object that cannot be pickled, or a retriever bound to a service only this machine reaches) it runs here.
- **Rewriting** (a conversation run's ``rewriter`` query form): batches of rewrite requests spread over ``workers``
  actors as judging's are; each rebuilds the rewriter once from its recipe (an LLM rewriter's answer cache pinned
  to this process's file), its LLM calls under the same ``max_in_flight`` bound.

Results equal the ``local`` executor's: only where the work runs changes.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import math
import os
import re
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

from evret_core.sdk import (
    ContextColumns,
    EvretError,
    Executor,
    GenerateRun,
    JudgeRun,
    JudgmentContext,
    Metric,
    RankedBatch,
    Recipe,
    RewriteRequest,
    RewriteRun,
    recipe_of,
    verdict_of,
)
from evret_ray.remote_errors import errors_as_evret

os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # never phone home unless the user asked for it


# the executors of this process that keep workers: a stage that cannot get its CPUs because another one holds them
# is an error naming it, not a wait without end
_KEEPING: weakref.WeakSet[RayExecutor] = weakref.WeakSet()


_RAY_ADDRESS_ADVICE = re.compile(r"Please specify the one to connect to by setting (the )?`--address`\s+flag or "
                                 r"`RAY_ADDRESS` environment variable\.?")


def in_evret_terms(message: str) -> str:
    """A ``ray.init`` error with Ray's advice (its own ``--address`` flag) put as Evret's option."""
    return _RAY_ADDRESS_ADVICE.sub(
        "Name the cluster with --executor-option address=HOST:PORT (or address=ray://HOST:10001; the RAY_ADDRESS "
        "environment variable works too), start one with `ray start --head`, or leave address unset to start Ray "
        "in this process.", message)


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
        self.batches_per_worker = 4
        self.started_ray = False
        self.last_limiter_stats: dict[str, int] | None = None
        self._pools: dict[str, tuple[str, list[Any]]] = {}
        self._limiter: Any = None

    # -- cluster ---------------------------------------------------------------------------------------------
    def _ray(self) -> Any:
        import ray

        if not ray.is_initialized():
            options = {"include_dashboard": False, "log_to_driver": True, **self.init_options}
            try:
                ray.init(address=self.address, **options)
            except (ConnectionError, RuntimeError, ValueError) as exc:
                raise EvretError(f"executor 'ray': could not start or join Ray at "
                                 f"{self.address or 'a new local cluster'}: {in_evret_terms(str(exc))}") from None
            self.started_ray = True
        return ray

    def worker_count(self) -> int:
        """The judging actors a run uses."""
        if self.workers is not None:
            return self.workers
        cpus = self._ray().cluster_resources().get("CPU", 1.0)
        return max(1, int(cpus))

    def shutdown(self) -> None:
        """Kill this executor's workers and limiter, and stop Ray if this executor started it (a cluster it
        joined keeps running)."""
        import ray

        if ray.is_initialized():
            self._reset()
        self._pools.clear()
        _KEEPING.discard(self)
        self._limiter = None
        if self.started_ray:
            import ray

            ray.shutdown()
            self.started_ray = False

    # -- actors, kept across stages and runs ------------------------------------------------------------------
    def _actors(self, role: str, key: str, make: Callable[[], Any], n: int) -> list[Any]:
        """``n`` live actors of ``role`` built for ``key``: the pool of an earlier stage or run when its key is
        the same (an actor that died since is replaced), else a new pool (the old one killed). All new actors
        start at once."""
        ray = self._ray()
        pool = self._pools.get(role)
        if pool is not None and pool[0] != key:
            self._kill(role)
            pool = None
        actors: list[Any] = [] if pool is None else pool[1]
        if actors:
            pings = [a.ready.remote() for a in actors]
            for i, ping in enumerate(pings):
                try:
                    ray.get(ping, timeout=120)
                except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError):
                    with contextlib.suppress(Exception):
                        ray.kill(actors[i])
                    actors[i] = make()
        if n > len(actors):
            self._make_room(role, (n - len(actors)) * self.worker_cpus, (n - len(actors)) * self.worker_gpus)
            actors.extend(make() for _ in range(n - len(actors)))
        self._pools[role] = (key, actors)
        _KEEPING.add(self)
        return actors[:n]

    def _kept(self) -> int:
        return sum(len(actors) for _, actors in self._pools.values())

    def _make_room(self, keep: str | None, cpus: float, gpus: float) -> None:
        """Kill the idle pools of other stages when the cluster lacks the CPUs or GPUs a stage is about to ask
        for (a pool holds what its actors reserved for as long as it lives)."""
        ray = self._ray()
        total = ray.cluster_resources()
        for resource, need, option in (("CPU", cpus, "worker_cpus"), ("GPU", gpus, "worker_gpus")):
            if need > total.get(resource, 0.0) + 1e-9:
                raise EvretError(f"executor 'ray': the stage needs {need:g} {resource}s ({option} x workers) but "
                                 f"the cluster has {total.get(resource, 0.0):g}; lower 'workers' or {option!r}")
        free = ray.available_resources()
        if free.get("CPU", 0.0) + 1e-9 >= cpus and free.get("GPU", 0.0) + 1e-9 >= gpus:
            return
        others = [e for e in list(_KEEPING) if e is not self and e._kept()]
        if others:  # what this executor's own idle pools would give back is not enough: another one holds it
            own = sum(len(actors) for role, (_, actors) in self._pools.items() if role != keep)
            for resource, need, per_worker in (("CPU", cpus, self.worker_cpus), ("GPU", gpus, self.worker_gpus)):
                if free.get(resource, 0.0) + own * per_worker + 1e-9 < need:
                    held = sum(e._kept() for e in others)
                    raise EvretError(
                        f"executor 'ray': the stage needs {need:g} {resource}s, but {held} worker(s) kept by "
                        f"{len(others)} other RayExecutor object(s) in this process hold the cluster's "
                        f"{resource}s; call shutdown() on the executor you are done with, or reuse one executor")
        for role in list(self._pools):
            if role != keep:
                self._kill(role)

    def _kill(self, role: str) -> None:
        pool = self._pools.pop(role, None)
        if pool is not None:
            import ray

            for actor in pool[1]:
                with contextlib.suppress(Exception):
                    ray.kill(actor)

    def _reset(self) -> None:
        """Kill every actor and the limiter (after a failed stage: nothing half-done is reused)."""
        for role in list(self._pools):
            self._kill(role)
        if self._limiter is not None:
            import ray

            with contextlib.suppress(Exception):
                ray.kill(self._limiter)
            self._limiter = None

    def _limiter_actor(self) -> Any:
        if self.max_in_flight is None:
            return None
        if self._limiter is None:
            from evret_ray.limiter import start_limiter

            self._limiter = start_limiter(self.max_in_flight)
        return self._limiter

    def _ship(self, made: Recipe) -> tuple[Recipe, str]:
        """How workers get the part ``made`` describes, and the key its pool is kept under: a part made by name by
        its recipe, any other object pickled once into the object store (the recipe then carries the reference)
        and keyed by the digest of its pickle (an object changed since is sent again)."""
        import cloudpickle

        ray = self._ray()
        if made.by_name or made.part is None:
            payload = cloudpickle.dumps((made, self.worker_setup))
            return made, hashlib.sha256(payload).hexdigest()
        kind = made.kind.replace("_", " ")
        try:
            data = cloudpickle.dumps(made.part)
        except Exception as exc:  # what cannot be pickled says so in many ways
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise EvretError(f"executor 'ray': {kind} {type(made.part).__name__} was not made by name and cannot be "
                             f"sent to the workers ({first})" + (
                                 "; pass executor option retrieve_on_cluster=false to retrieve in this process"
                                 if kind == "retriever" else "")) from None
        digest = hashlib.sha256(data + cloudpickle.dumps(self.worker_setup)).hexdigest()
        return Recipe.of_object(made.kind, ray.put(data)), digest

    def _dispatch(self, actors: Sequence[Any], submit: Callable[[Any, Any], Any], items: Sequence[Any],
                  per_actor: int) -> Iterator[Any]:
        """Results of ``submit(actor, item)`` for every item, in order, with up to ``per_actor`` items out on
        each actor: a worker starts its next item as soon as one ends, never waiting for the others."""
        ray = self._ray()
        todo = iter(enumerate(items))
        pending: dict[Any, tuple[int, Any]] = {}
        results: dict[int, Any] = {}

        def feed(actor: Any) -> None:
            item = next(todo, None)
            if item is not None:
                pending[submit(actor, item[1])] = (item[0], actor)

        for _ in range(per_actor):
            for actor in actors:
                feed(actor)
        want = 0
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            for ref in done:
                index, actor = pending.pop(ref)
                results[index] = ray.get(ref)
                feed(actor)
            while want in results:
                yield results.pop(want)
                want += 1

    @contextmanager
    def _stage(self) -> Iterator[Any]:
        """A stage's errors read as they would locally; after a failure every actor is killed (and rebuilt by the
        next stage), so that no half-done state is reused."""
        ray = self._ray()
        try:
            with errors_as_evret(ray):
                yield ray
        except BaseException:
            self._reset()
            raise

    # -- stages ----------------------------------------------------------------------------------------------
    def retrieve(self, retriever: Any, batches: Sequence[list[str]], k: int,
                 progress: Callable[[int], None]) -> list[list[Any]]:
        if not self.retrieve_on_cluster:
            return super().retrieve(retriever, batches, k, progress)
        from evret_ray.workers import RetrieveWorker

        with self._stage() as ray:
            spec, key = self._ship(recipe_of("retriever", retriever))
            actor = ray.remote(RetrieveWorker).options(num_cpus=self.worker_cpus, num_gpus=self.worker_gpus)
            actors = self._actors("retrieve", key, lambda: actor.remote(spec, self.worker_setup),
                                  min(self.worker_count(), len(batches)))
            out: list[list[Any]] = []
            done = 0
            for texts, got in zip(batches, self._dispatch(actors, lambda a, t: a.retrieve_batch.remote(t, k),
                                                          batches, 2), strict=True):
                out.append(got)
                done += len(texts)
                progress(done)
        return out

    def judge(self, judge: Any, contexts: Sequence[JudgmentContext], batch_size: int,
              progress: Callable[[int], None]) -> JudgeRun:
        """The judge's verdict on every context, in batches over ``workers`` actors that rebuild the judge once from
        its recipe (an LLM judge's cache pinned to this process's file, its calls under ``max_in_flight``). An LLM
        judge's texts are scanned for injections here, once, as locally: one WARNING line, one count per distinct
        text in the stats and the manifest."""
        from evret_ray.workers import JudgeWorker

        if not contexts:
            return super().judge(judge, contexts, batch_size, progress)
        _refuse_budgets(judge)
        with self._stage():
            scans = self._scan_here(judge, contexts)
            verdicts, stats = self._judging("judge", JudgeWorker, "judge_batch", judge, contexts, batch_size,
                                            progress)
            if scans and stats is not None:
                stats["injection"] = judge.injections.stats()
        return JudgeRun(verdicts, stats)

    def grade(self, judge: Any, contexts: Sequence[JudgmentContext], batch_size: int,
              progress: Callable[[int], None]) -> JudgeRun:
        """A graded judge's grade of every context, in batches over ``workers`` actors as :meth:`judge`'s (the
        judge rebuilt once per worker from its recipe, an LLM judge's cache pinned to this process's file, its calls
        under ``max_in_flight``); each batch's grades checked on the worker as locally, the verdicts the grades at
        the judge's cut. An LLM judge's texts are scanned for injections here, once, as locally."""
        from evret_ray.workers import GradeWorker

        if not contexts:
            return super().grade(judge, contexts, batch_size, progress)
        _refuse_budgets(judge)
        with self._stage():
            scans = self._scan_here(judge, contexts)
            grades, stats = self._judging("grade", GradeWorker, "grade_batch", judge, contexts, batch_size,
                                          progress)
            if scans and stats is not None:
                stats["injection"] = judge.injections.stats()
        return JudgeRun([verdict_of(judge, g) for g in grades], stats, grades)

    @staticmethod
    def _scan_here(judge: Any, contexts: Sequence[JudgmentContext]) -> bool:
        """Whether ``judge`` scans its texts for prompt injections (:func:`~evret_ray.workers.scans_on_driver`),
        having scanned every text of the run here: one WARNING line and one count of distinct texts, as locally;
        its workers leave the scan to this process."""
        from evret_ray.workers import scans_on_driver

        if not scans_on_driver(judge):
            return False
        judge.reset_stats()
        judge.prepare(contexts)
        return True

    def _judging(self, role: str, worker: type, method: str, judge: Any, contexts: Sequence[JudgmentContext],
                 batch_size: int, progress: Callable[[int], None]) -> tuple[list[Any], dict[str, Any] | None]:
        """``worker.method`` over batches of ``contexts`` on the ``role`` pool: the answers in order, and the
        workers' judge stats for the run merged (:func:`merge_stats`)."""
        ray = self._ray()
        spec, key = self._ship(recipe_of("judge", judge))
        workers = self.worker_count()
        # about eight batches per worker at most: a worker that starts (or finishes) early takes more, so no
        # worker idles while another still starts or finishes a long batch
        size = max(1, min(batch_size, math.ceil(len(contexts) / (8 * workers))))
        # columns travel as columns: a slice pickles as the answers and texts it uses plus two index arrays,
        # and the judge on the worker reads them as it would locally (no JudgmentContext built for it)
        columns = isinstance(contexts, ContextColumns)
        batches = [contexts[i : i + size] if columns else list(contexts[i : i + size])
                   for i in range(0, len(contexts), size)]
        limiter = self._limiter_actor()
        actor = ray.remote(worker).options(num_cpus=self.worker_cpus, num_gpus=self.worker_gpus,
                                           max_concurrency=self.batches_per_worker + 2)
        actors = self._actors(role, f"{key}:{self.max_in_flight}",
                              lambda: actor.remote(spec, limiter, self.worker_setup), min(workers, len(batches)))
        ray.get([a.reset.remote() for a in actors] + ([limiter.reset_peak.remote()] if limiter else []))
        answers: list[Any] = []
        for got in self._dispatch(actors, lambda a, batch: getattr(a, method).remote(batch), batches,
                                  self.batches_per_worker):
            answers.extend(got)
            progress(len(answers))
        stats: dict[str, Any] | None = None
        for got_stats in ray.get([a.stats.remote() for a in actors]):
            if got_stats is not None:
                stats = got_stats if stats is None else merge_stats(stats, got_stats)
        if limiter is not None:
            self.last_limiter_stats = ray.get(limiter.stats.remote())
        return answers, stats

    def rewrite(self, rewriter: Any, requests: Sequence[RewriteRequest], batch_size: int,
                progress: Callable[[int], None]) -> RewriteRun:
        """Batches of rewrite requests over ``workers`` actors that rebuild the rewriter from its recipe (an LLM
        rewriter's cache pinned to this process's file); a rewriter that scans the messages for injections scans
        them here, once, and its workers leave the scan to the driver."""
        from evret_ray.workers import RewriteWorker

        if not requests:
            return super().rewrite(rewriter, requests, batch_size, progress)
        with self._stage() as ray:
            spec, key = self._ship(recipe_of("rewriter", rewriter))
            workers = self.worker_count()
            size = max(1, min(batch_size, math.ceil(len(requests) / (8 * workers))))
            batches = [list(requests[i : i + size]) for i in range(0, len(requests), size)]
            scans = hasattr(rewriter, "scan_here") and hasattr(rewriter, "injections")
            if scans:  # one WARNING line and one count of distinct texts for the run, as locally
                rewriter.reset_stats()
                rewriter.prepare(requests)
            limiter = self._limiter_actor()
            actor = ray.remote(RewriteWorker).options(num_cpus=self.worker_cpus, num_gpus=self.worker_gpus,
                                                      max_concurrency=self.batches_per_worker + 2)
            actors = self._actors("rewrite", f"{key}:{self.max_in_flight}",
                                  lambda: actor.remote(spec, limiter, self.worker_setup), min(workers, len(batches)))
            ray.get([a.reset.remote() for a in actors] + ([limiter.reset_peak.remote()] if limiter else []))
            texts: list[str | None] = []
            for got in self._dispatch(actors, lambda a, batch: a.rewrite_batch.remote(batch), batches,
                                      self.batches_per_worker):
                texts.extend(got)
                progress(len(texts))
            stats: dict[str, Any] | None = None
            for got_stats in ray.get([a.stats.remote() for a in actors]):
                if got_stats is not None:
                    stats = got_stats if stats is None else merge_stats(stats, got_stats)
            if scans and stats is not None:
                stats["injection"] = rewriter.injections.stats()
            if limiter is not None:
                self.last_limiter_stats = ray.get(limiter.stats.remote())
        return RewriteRun(texts, stats)

    def generate(self, runner: Any, requests: dict[Any, Any], progress: Callable[[int], None]) -> GenerateRun:
        """Chunks of questions (every condition of a question in one chunk, so that a call two conditions share
        is asked once, as locally) over ``workers`` actors that rebuild the parts from ``runner.recipes``."""
        import cloudpickle

        from evret_ray.workers import GenerateWorker

        if not requests:
            return GenerateRun({}, None)
        with self._stage() as ray:
            recipes: dict[str, Recipe] = {}
            digests: list[str] = []
            for role, made in runner.recipes.items():
                recipes[role], digest = self._ship(made)
                digests.append(digest)
            key = hashlib.sha256(cloudpickle.dumps((type(runner), digests, runner.pipelined, self.worker_setup,
                                                    self.max_in_flight))).hexdigest()
            by_question: dict[Any, dict[Any, Any]] = {}
            for slot, request in requests.items():
                by_question.setdefault(slot[1], {})[slot] = request
            groups = list(by_question.values())
            workers = self.worker_count()
            per_chunk = max(1, math.ceil(len(groups) / (8 * workers)))
            chunks = [{s: r for group in groups[i : i + per_chunk] for s, r in group.items()}
                      for i in range(0, len(groups), per_chunk)]
            scanners = _scan_on_driver(runner, requests)
            limiter = self._limiter_actor()
            actor = ray.remote(GenerateWorker).options(num_cpus=self.worker_cpus, num_gpus=self.worker_gpus,
                                                       max_concurrency=self.batches_per_worker + 2)
            actors = self._actors("generate", key,
                                  lambda: actor.remote(type(runner), recipes, runner.pipelined, limiter,
                                                               self.worker_setup),
                                  min(workers, len(chunks)))
            ray.get([a.reset.remote() for a in actors] + ([limiter.reset_peak.remote()] if limiter else []))
            out: dict[Any, Any] = {}
            for got in self._dispatch(actors, lambda a, chunk: a.generate.remote(chunk), chunks,
                                      self.batches_per_worker):
                out.update(got)
                progress(len(out))
            stats: dict[str, dict[str, Any]] = {}
            for got_stats in ray.get([a.stats.remote() for a in actors]):
                for role, part_stats in got_stats.items():
                    stats[role] = merge_stats(stats[role], part_stats) if role in stats else part_stats
            for role, part in scanners.items():
                if role in stats:
                    stats[role]["injection"] = part.injections.stats()
            if limiter is not None:
                self.last_limiter_stats = ray.get(limiter.stats.remote())
        return GenerateRun({slot: out[slot] for slot in requests}, stats)

    def metrics(self, metrics: Sequence[Metric], batches: Iterable[RankedBatch]) -> dict[str, np.ndarray]:
        batches = iter(batches)
        first = next(batches, None)
        second = next(batches, None)
        if second is None:  # one chunk: nothing to spread, and a task worker would only add its start
            return super().metrics(metrics, [] if first is None else [first])
        ray = self._ray()
        from evret_ray.workers import metrics_task

        batches = itertools.chain([first, second], batches)  # type: ignore[list-item]
        self._make_room(None, 1.0, 0.0)  # a metric task takes one CPU
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


def _refuse_budgets(judge: Any) -> None:
    """Refuse a judge whose stages have a budget (a ``cascade`` stage's ``max_judgments`` or ``max_tokens``) before
    any work: each worker would count it alone, so the run could spend workers x the budget."""
    stages = getattr(judge, "stages", None)
    for index, stage in enumerate(stages if isinstance(stages, (list, tuple)) else ()):
        for key in ("max_judgments", "max_tokens"):
            if getattr(stage, key, None) is not None:
                raise EvretError(
                    f"executor 'ray': {getattr(judge, 'name', type(judge).__name__)} judge stage {index + 1} "
                    f"({getattr(stage, 'name', '?')!r}) has {key}={getattr(stage, key)}, a budget each worker would "
                    f"spend on its own; drop the budget or judge on the local executor")


def _scan_on_driver(runner: Any, requests: dict[Any, Any]) -> dict[str, Any]:
    """The runner's parts that scan contexts for prompt injections, each having scanned every request's contexts
    here, once (one WARNING line per part, counts of distinct texts); workers leave the scan to the driver."""
    scanners = {role: part for role, part in runner.parts().items()
                if getattr(part, "sends_contexts", False) and hasattr(part, "injections")}
    for part in scanners.values():
        part.injections.reset()
    runner.prepare_parts(requests)
    return scanners


def merge_stats(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Two batches' judge stats as one: numbers added, nested dicts merged, lists of dicts of one length (a
    cascade's ``stages``) merged item by item, other values kept from ``a``. A share is not a count, so the
    cascade's ``last_judge_fraction`` is computed again from the merged counts (added, two batches' 0.6 and 0.7
    would read 1.3)."""
    out = dict(a)
    for key, value in b.items():
        mine = out.get(key)
        if isinstance(mine, dict) and isinstance(value, dict):
            out[key] = merge_stats(mine, value)
        elif (isinstance(mine, list) and isinstance(value, list) and len(mine) == len(value)
              and all(isinstance(x, dict) for x in (*mine, *value))):
            out[key] = [merge_stats(x, y) for x, y in zip(mine, value, strict=True)]
        elif (isinstance(mine, (int, float)) and isinstance(value, (int, float))
              and not isinstance(mine, bool) and not isinstance(value, bool)):
            out[key] = mine + value
        elif key not in out:
            out[key] = value
    if "last_judge_fraction" in out and isinstance(out.get("judgments"), int):
        total = out["judgments"]
        out["last_judge_fraction"] = out.get("last_judge_calls", 0) / total if total else 0.0
    return out


__all__ = ["RayExecutor", "merge_stats"]
