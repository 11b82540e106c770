"""A de-duplicating, rate-limited work queue (client-go's workqueue, for asyncio).

* a key is queued at most once, however often it is added;
* a key being processed is never handed to a second worker: added meanwhile, it is queued
  again when the first worker calls ``done``;
* ``add_rate_limited`` retries with per-key exponential backoff (base × 2^failures, capped);
  ``forget`` resets the count after a success;
* ``add_after`` schedules a key for later (the replan timeout of a pending claim).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Hashable


class ShutDown(Exception):
    """The queue was shut down: workers stop."""


class WorkQueue:
    def __init__(self, *, base_delay: float = 0.05, max_delay: float = 300.0):
        self._queue: deque[Hashable] = deque()
        self._queued: set[Hashable] = set()
        self._processing: set[Hashable] = set()
        self._dirty: set[Hashable] = set()  # added while processing
        self._failures: dict[Hashable, int] = {}
        self._timers: dict[Hashable, asyncio.TimerHandle] = {}
        self._ready = asyncio.Event()
        self._shutting_down = False
        self.base_delay, self.max_delay = base_delay, max_delay
        self.on_change: Callable[[], None] = lambda: None  # after a key is added, scheduled or done

    def __len__(self) -> int:
        return len(self._queue)

    @property
    def idle(self) -> bool:
        """Nothing queued, nothing in progress, nothing scheduled."""
        return self.quiet and not self._timers

    @property
    def quiet(self) -> bool:
        """Nothing queued, nothing in progress (something may be scheduled for later)."""
        return not self._queue and not self._processing

    def add(self, key: Hashable) -> None:
        if self._shutting_down:
            return
        if key in self._processing:
            self._dirty.add(key)
            return
        if key not in self._queued:
            self._queued.add(key)
            self._queue.append(key)
            self._ready.set()
            self.on_change()

    def add_after(self, key: Hashable, delay: float) -> None:
        """Add ``key`` in ``delay`` seconds (the earliest of several requests wins)."""
        if self._shutting_down:
            return
        if delay <= 0:
            self.add(key)
            return
        loop = asyncio.get_running_loop()
        due = loop.time() + delay
        timer = self._timers.get(key)
        if timer is not None:
            if timer.when() <= due:
                return
            timer.cancel()
        self._timers[key] = loop.call_at(due, self._fire, key)
        self.on_change()

    def _fire(self, key: Hashable) -> None:
        self._timers.pop(key, None)
        self.add(key)

    def add_rate_limited(self, key: Hashable) -> float:
        """Retry ``key`` after its backoff; returns the delay chosen."""
        failures = self._failures.get(key, 0)
        self._failures[key] = failures + 1
        delay = min(self.base_delay * (2**failures), self.max_delay)
        self.add_after(key, delay)
        return delay

    def failures(self, key: Hashable) -> int:
        return self._failures.get(key, 0)

    def forget(self, key: Hashable) -> None:
        self._failures.pop(key, None)

    async def get(self) -> Hashable:
        while not self._queue:
            if self._shutting_down:
                raise ShutDown
            self._ready.clear()
            await self._ready.wait()
        key = self._queue.popleft()
        self._queued.discard(key)
        self._processing.add(key)
        return key

    def done(self, key: Hashable) -> None:
        self._processing.discard(key)
        if key in self._dirty:
            self._dirty.discard(key)
            self.add(key)
        self.on_change()

    def shut_down(self) -> None:
        self._shutting_down = True
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
        self._ready.set()
