"""One cluster-wide bound on LLM requests in flight: a Ray actor every worker's LLM client acquires from.

:class:`InFlightActor` holds the count. Two worker-side handles implement
:class:`evret_core.contracts.executor.InFlightLimiter` over it (the executor installs one in each worker
with :func:`evret_core.contracts.executor.use_shared_limiter`, so the LLM layer's own client obeys it around every
attempt):

- :class:`LeasedLimiter` (what the executor uses): a worker leases slots from the actor in bulk and hands a
  slot freed by one of its requests straight to its next waiting request, so a saturated worker makes no actor
  call per request; slots it has no waiter for go back to the actor at once. The bound holds because every slot
  in use or handed on was leased: the workers together never hold more than the limit.
- :class:`RayInFlightLimiter`: one acquire and one release call to the actor per request (the plain form).
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
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
        self.calls = 0
        self._cond: asyncio.Condition | None = None

    def _condition(self) -> asyncio.Condition:
        if self._cond is None:  # made on the actor's own event loop
            self._cond = asyncio.Condition()
        return self._cond

    async def acquire(self) -> None:
        await self.acquire_many(1)

    async def acquire_many(self, want: int) -> int:
        """Wait until a slot is free, then take up to ``want`` free slots; returns how many were taken."""
        cond = self._condition()
        self.calls += 1
        async with cond:
            await cond.wait_for(lambda: self.in_flight < self.limit)
            got = max(1, min(int(want), self.limit - self.in_flight))
            self.in_flight += got
            self.granted += got
            self.peak = max(self.peak, self.in_flight)
            return got

    async def release(self, *after: Any, count: int = 1) -> None:
        """Give ``count`` slots back. ``after`` (an acquire's result, resolved by Ray first) orders a release
        behind an acquire whose caller was cancelled."""
        cond = self._condition()
        self.calls += 1
        async with cond:
            self.in_flight = max(0, self.in_flight - int(count))
            cond.notify(int(count))

    async def reset_peak(self) -> None:
        """Start counting the peak and the calls afresh (at the start of a stage)."""
        self.peak = self.in_flight
        self.granted = 0
        self.calls = 0

    async def stats(self) -> dict[str, int]:
        return {"limit": self.limit, "in_flight": self.in_flight, "peak": self.peak, "granted": self.granted,
                "calls": self.calls}


def start_limiter(limit: int) -> Any:
    """An :class:`InFlightActor` on the cluster (no CPU reserved; enough concurrency for every waiter)."""
    return ray.remote(InFlightActor).options(num_cpus=0, max_concurrency=100_000).remote(limit)


class RayInFlightLimiter:
    """The worker-side :class:`evret_core.contracts.executor.InFlightLimiter` over an :class:`InFlightActor` handle:
    one actor round trip to acquire and one to release, per request."""

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


class LeasedLimiter:
    """The worker-side :class:`evret_core.contracts.executor.InFlightLimiter` that leases slots in bulk (see the
    module).

    Usable from any event loop and thread of the worker: waiters are futures of their own loop, woken with
    ``call_soon_threadsafe``; the lease replies arrive on Ray's threads."""

    def __init__(self, actor: Any) -> None:
        self.actor = actor
        self._lock = threading.Lock()
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._asking = False  # a lease request is out

    async def acquire(self) -> None:
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[None] = loop.create_future()
        with self._lock:
            self._waiters.append(waiter)
            want = 0 if self._asking else len(self._waiters)
            self._asking = self._asking or want > 0
        if want:
            self._lease(want)
        try:
            await waiter
        except BaseException:
            with self._lock:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)
            # A slot woken into this waiter before it was cancelled is passed on here; one still on its way
            # finds the waiter cancelled and is passed on by _wake.
            if waiter.done() and not waiter.cancelled():
                self.release()
            raise

    def release(self) -> None:
        self._grant(1)

    # -- inside ------------------------------------------------------------------------------------------------
    def _lease(self, want: int) -> None:
        """Ask the actor for ``want`` slots; one request out at a time, so that requests coalesce."""
        ref = self.actor.acquire_many.remote(want)
        ref.future().add_done_callback(self._leased)

    def _leased(self, done: Any) -> None:
        try:
            got = int(done.result())
        except BaseException:  # the limiter is gone (the run is being torn down): wake nobody
            return
        self._grant(got)
        with self._lock:
            want = len(self._waiters)
            self._asking = want > 0
        if want:  # waiters the grant did not cover (or that came since): ask again for all of them
            self._lease(want)

    def _grant(self, slots: int) -> None:
        """Hand ``slots`` to waiting requests, first come first served; give the rest back to the actor."""
        handed: list[asyncio.Future[None]] = []
        with self._lock:
            while slots and self._waiters:
                waiter = self._waiters.popleft()
                handed.append(waiter)
                slots -= 1
        for waiter in handed:
            try:
                waiter.get_loop().call_soon_threadsafe(self._wake, waiter)
            except RuntimeError:  # its loop is closed: nobody waits on it any more
                slots += 1
        if slots:
            self.actor.release.remote(count=slots)

    def _wake(self, waiter: asyncio.Future[None]) -> None:
        if waiter.done():  # cancelled before the slot reached it
            self.release()
        else:
            waiter.set_result(None)
