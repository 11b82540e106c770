"""Timing shared by the in-process benchmarks."""

from __future__ import annotations

import time
from collections.abc import Callable


def per_call(fn: Callable[[], object], rounds: int, repeat: int = 5) -> float:
    """Best-of-``repeat`` mean seconds per call (the least disturbed run on a shared machine)."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(rounds):
            fn()
        best = min(best, (time.perf_counter() - start) / rounds)
    return best
