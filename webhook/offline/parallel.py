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
import queue
from typing import Any, Callable, TypeVar

T = TypeVar("T")

MIN_PER_PROCESS = 200  # below this a worker's start costs more than it saves

def available_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


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
    """Forked workers take chunks of indices from one queue and send back each chunk's
    answers with its number; the parent puts the chunks back in order. ``work`` reaches the
    workers as the forked processes' own argument: it is never pickled, nothing global holds it."""
    context = multiprocessing.get_context("fork")
    # small enough that the workers finish together (one left alone at the end waits at most a
    # chunk) and that the progress bar moves; large enough to cost no IPC
    chunk = max(16, min(100, count // (jobs * 8)))
    bounds = [(start, min(start + chunk, count)) for start in range(0, count, chunk)]
    chunks, answers = context.Queue(), context.Queue()
    for numbered in enumerate(bounds):
        chunks.put(numbered)
    for _ in range(jobs):
        chunks.put(None)  # one stop per worker, after the last chunk
    workers = [context.Process(target=_judge_chunks, args=(work, chunks, answers), daemon=True)
               for _ in range(jobs)]
    for worker in workers:
        worker.start()
    out: list[T] = []
    waiting: dict[int, list[T]] = {}
    try:
        while len(out) < count:
            try:
                number, part = answers.get(timeout=1.0)
            except queue.Empty:
                dead = [w.exitcode for w in workers if w.exitcode not in (None, 0)]
                if dead:
                    raise RuntimeError(f"a worker process died (exit code {dead[0]})") from None
                continue
            if isinstance(part, BaseException):
                raise RuntimeError(f"a worker failed: {part}") from part
            waiting[number] = part
            progress(len(part))
            while len(out) // chunk in waiting:  # every chunk but the last is ``chunk`` long
                out.extend(waiting.pop(len(out) // chunk))
    finally:
        for worker in workers:
            if worker.is_alive():
                worker.terminate()
            worker.join()
    return out


def _judge_chunks(work: Callable[[int], object], chunks: Any, answers: Any) -> None:
    """A worker's life: answer chunks until the stop; an exception goes back as the answer."""
    while (numbered := chunks.get()) is not None:
        number, (start, stop) = numbered
        try:
            answers.put((number, [work(i) for i in range(start, stop)]))
        except BaseException as exc:  # noqa: BLE001 - sent to the parent, which raises it
            answers.put((number, RuntimeError(f"{type(exc).__name__}: {exc}")))
            return
