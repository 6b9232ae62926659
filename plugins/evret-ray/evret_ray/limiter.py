"""One cluster-wide bound on LLM requests in flight: a Ray actor every worker's LLM client acquires from.

:class:`InFlightActor` holds the count; :class:`RayInFlightLimiter` is the worker-side handle, an
:class:`evret_core.llm.InFlightLimiter` that the executor installs in each worker with
:func:`evret_core.llm.use_shared_limiter`, so the LLM layer's own client obeys it around every attempt.
"""

from __future__ import annotations

import asyncio
from typing import Any

import ray


class InFlightActor:
    """At most ``limit`` slots out at once, handed out first come first served; counts the peak. Made a Ray
    actor by :func:`start_limiter`."""

    def __init__(self, limit: int) -> None:
        self.limit = int(limit)
        self.in_flight = 0
        self.peak = 0
        self.granted = 0
        self._cond: asyncio.Condition | None = None

    def _condition(self) -> asyncio.Condition:
        if self._cond is None:  # made on the actor's own event loop
            self._cond = asyncio.Condition()
        return self._cond

    async def acquire(self) -> None:
        cond = self._condition()
        async with cond:
            await cond.wait_for(lambda: self.in_flight < self.limit)
            self.in_flight += 1
            self.granted += 1
            self.peak = max(self.peak, self.in_flight)

    async def release(self, *after: Any) -> None:
        """Give one slot back. ``after`` (an acquire's result, resolved by Ray first) orders a release behind
        an acquire whose caller was cancelled."""
        cond = self._condition()
        async with cond:
            self.in_flight = max(0, self.in_flight - 1)
            cond.notify()

    async def stats(self) -> dict[str, int]:
        return {"limit": self.limit, "in_flight": self.in_flight, "peak": self.peak, "granted": self.granted}


def start_limiter(limit: int) -> Any:
    """An :class:`InFlightActor` on the cluster (no CPU reserved; enough concurrency for every waiter)."""
    return ray.remote(InFlightActor).options(num_cpus=0, max_concurrency=100_000).remote(limit)


class RayInFlightLimiter:
    """The worker-side :class:`evret_core.llm.InFlightLimiter` over an :class:`InFlightActor` handle."""

    def __init__(self, actor: Any) -> None:
        self.actor = actor

    async def acquire(self) -> None:
        ref = self.actor.acquire.remote()
        try:
            await ref
        except asyncio.CancelledError:
            # The actor may still grant the slot: give it back once it has (Ray resolves ``ref`` first).
            self.actor.release.remote(ref)
            raise

    def release(self) -> None:
        self.actor.release.remote()
