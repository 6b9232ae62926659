"""The limits :class:`~evret_core.llm.client.LLMClient` applies: a per-minute budget (requests or tokens) and an
adaptive bound on calls in flight. Optionally a client also obeys an
:class:`~evret_core.contracts.executor.InFlightLimiter` shared beyond one client (several processes, or every
worker of a cluster): it acquires a slot of it after its own concurrency slot, around each attempt.

Both limits here are shared by every caller of one client, possibly from several event loops in turn (``run_sync``
starts a loop per batch), so their state sits under thread locks and their asyncio parts are made per event loop.
"""

from __future__ import annotations

import asyncio
import math
import threading
import time


class RateLimiter:
    """Spends a budget of ``per_minute`` units (requests, or tokens) evenly: a call that takes ``amount`` units
    starts once the calls before it have had their share of the minute. :meth:`charge` corrects an estimate
    afterwards (the tokens a call really used)."""

    def __init__(self, per_minute: float) -> None:
        if not per_minute > 0 or not math.isfinite(per_minute):
            raise ValueError("per_minute must be a positive number")
        self.per_minute = float(per_minute)
        self.interval = 60.0 / self.per_minute  # seconds per unit
        self._next = 0.0
        self._lock = threading.Lock()

    async def acquire(self, amount: float = 1.0) -> None:
        # Reserve a start slot under the thread lock, then sleep outside it until the slot comes.
        with self._lock:
            now = time.monotonic()
            slot = max(now, self._next)
            self._next = slot + self.interval * max(0.0, amount)
        delay = slot - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)

    def charge(self, amount: float) -> None:
        """Add (or, when negative, give back) ``amount`` units to what was already reserved."""
        with self._lock:
            self._next = max(time.monotonic() if amount < 0 else self._next, self._next + self.interval * amount)


class AdaptiveConcurrency:
    """At most :attr:`limit` calls in flight. With ``adaptive``, a 429 halves the limit (at most once per
    window: 429s of calls that started before the last cut do not cut again) and every ``limit`` successes in a
    row raise it by one, up to ``maximum`` (additive increase, multiplicative decrease, as TCP does)."""

    def __init__(self, maximum: int, adaptive: bool = True) -> None:
        self.maximum = int(maximum)
        self.adaptive = adaptive
        self.limit = self.maximum
        self.lowest = self.maximum
        self.cuts = 0
        self._epoch = 0  # bumped at each cut; a call remembers the epoch it started in
        self._successes = 0
        self._in_flight = 0
        self._lock = threading.Lock()
        self._waiters: list[asyncio.Future[int]] = []  # FIFO; a freed slot is handed to the first one

    @property
    def in_flight(self) -> int:
        return self._in_flight

    async def acquire(self) -> int:
        """Wait for a free slot; returns the epoch the call starts in (give it back to :meth:`release`)."""
        with self._lock:
            if self._in_flight < self.limit and not self._waiters:
                self._in_flight += 1
                return self._epoch
            waiter: asyncio.Future[int] = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
        try:
            return await waiter
        except BaseException:
            with self._lock:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)
                    handed = False
                else:
                    handed = waiter.done() and not waiter.cancelled()
            if handed:  # the slot was ours already: pass it on
                self._give_back()
            raise

    def release(self, epoch: int, *, rate_limited: bool = False, succeeded: bool = False) -> None:
        """Free the slot (synchronous, so that a cancelled call frees it too); a rate-limited call may cut the
        limit, a success may grow it."""
        with self._lock:
            self._in_flight -= 1
            if self.adaptive:
                if rate_limited and epoch == self._epoch and self.limit > 1:
                    self.limit = max(1, self.limit // 2)
                    self.lowest = min(self.lowest, self.limit)
                    self.cuts += 1
                    self._epoch += 1
                    self._successes = 0
                elif succeeded and self.limit < self.maximum:
                    self._successes += 1
                    if self._successes >= self.limit:
                        self.limit += 1
                        self._successes = 0
        self._dispatch()

    def _give_back(self) -> None:
        with self._lock:
            self._in_flight -= 1
        self._dispatch()

    def _dispatch(self) -> None:
        """Hand free slots to waiters, first come first served; each wake-up costs one callback."""
        handed: list[tuple[asyncio.Future[int], int]] = []
        with self._lock:
            while self._waiters and self._in_flight < self.limit:
                waiter = self._waiters.pop(0)
                if waiter.done():
                    continue
                self._in_flight += 1
                handed.append((waiter, self._epoch))
        for waiter, epoch in handed:
            loop = waiter.get_loop()
            try:
                current = asyncio.get_running_loop()
            except RuntimeError:
                current = None
            if loop is current:
                self._hand(waiter, epoch)
            else:  # a waiter of a loop in another thread
                try:
                    loop.call_soon_threadsafe(self._hand, waiter, epoch)
                except RuntimeError:  # its loop is closed: nobody waits on it any more
                    self._give_back()

    def _hand(self, waiter: asyncio.Future[int], epoch: int) -> None:
        if waiter.done():  # cancelled before the slot reached it
            self._give_back()
        else:
            waiter.set_result(epoch)
