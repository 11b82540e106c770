"""Judging many documents on every core.

The admission chain is pure CPU work over data loaded once (CRDs, compiled policies, the
cluster state), so a large run forks worker processes that inherit all of it
(copy-on-write: nothing is loaded or compiled twice, nothing but indices goes to them) and
send back only the answers, in order.
"""

from __future__ import annotations

import gc
import multiprocessing
import os
from typing import Callable, TypeVar

T = TypeVar("T")

MIN_PER_PROCESS = 200  # below this a worker's start costs more than it saves

_work: Callable[[int], object] | None = None  # set in the parent just before forking


def available_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _run_chunk(bounds: tuple[int, int]) -> list[object]:
    start, stop = bounds
    return [_work(i) for i in range(start, stop)]


def map_ordered(work: Callable[[int], T], count: int, *, jobs: int,
                progress: Callable[[int], None] = lambda n: None) -> list[T]:
    """``[work(i) for i in range(count)]``, on up to ``jobs`` processes when that pays.

    ``work`` must not raise (return errors as values) and its results must pickle.
    """
    jobs = min(jobs, count // MIN_PER_PROCESS)
    # what was loaded before the run (the state, the documents parsed first, compiled policies)
    # lives as long as it: frozen, no garbage collection walks it again (in a forked worker a walk
    # would also copy every page it lies on)
    gc.freeze()
    try:
        if jobs <= 1 or "fork" not in multiprocessing.get_all_start_methods():
            out = []
            for i in range(count):
                out.append(work(i))
                progress(1)
            return out
        return _on_workers(work, count, jobs, progress)
    finally:
        gc.unfreeze()


def _on_workers(work: Callable[[int], T], count: int, jobs: int, progress: Callable[[int], None]) -> list[T]:
    global _work
    _work = work
    # small enough that the workers finish together (one left alone at the end waits at most a
    # chunk) and that the progress bar moves; large enough to cost no IPC
    chunk = max(16, min(100, count // (jobs * 8)))
    bounds = [(start, min(start + chunk, count)) for start in range(0, count, chunk)]
    out: list[T] = []
    try:
        with multiprocessing.get_context("fork").Pool(jobs) as pool:
            for part in pool.imap(_run_chunk, bounds):
                out.extend(part)
                progress(len(part))
    finally:
        _work = None
    return out
