"""Timing shared by the in-process benchmarks."""

from __future__ import annotations

import time
from collections.abc import Callable


def per_call(fn: Callable[[], object], rounds: int, repeat: int = 5,
             clock: Callable[[], float] = time.perf_counter) -> float:
    """Best-of-``repeat`` mean seconds per call (the least disturbed run on a shared machine);
    ``clock=time.thread_time`` counts the thread's CPU time only (steadier under load)."""
    best = float("inf")
    for _ in range(repeat):
        start = clock()
        for _ in range(rounds):
            fn()
        best = min(best, (clock() - start) / rounds)
    return best
