"""Where and when the chain judges a review: on the event loop, the reviews of one turn of
the loop as a batch (:class:`LoopBatch`), or in the worker pool against the apiserver's
deadline (:class:`Placement` chooses); and what the failure mode answers when the chain
cannot judge (not loaded, not ready, too slow, or it raised)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from webhook import logs
from webhook.admission.review import AdmissionRequest, AdmissionResult
from webhook.server.metrics import Metrics
from webhook.server.admitter import Admitter, AdmitterSlot

log = logs.get("server")

T = TypeVar("T")


@dataclass(slots=True)
class Review:
    """One review on its way through the server (see :class:`LoopBatch`)."""

    endpoint: str
    mutating: bool
    body: bytes
    api_version: str = ""
    admission: AdmissionRequest = field(init=False)
    key: tuple[str, str] = ("", "")  # endpoint and kind label: Placement's and the metrics' key
    result: AdmissionResult | None = None


class Placement:
    """Where the chain judges a review: on the event loop or in the worker pool.

    The pool costs a thread hop per review, and the chain runs colder there (more CPU per
    review in all: BENCHMARKS.md), but there the deadline can cut a slow review short and
    the loop keeps answering others meanwhile. So a review runs on the loop only when its
    body is small (the chain's cost grows with the object) and the last review of its
    endpoint and kind was cheap (CPU time: at most about ten hops) and quick (wall time:
    nothing blocked it); otherwise in the pool. A kind starts in the pool (its cost
    unknown), and one costly review sends it back there.
    """

    def __init__(self, max_bytes: int, max_cpu_seconds: float, max_seconds: float):
        self.max_bytes, self.max_cpu_seconds, self.max_seconds = max_bytes, max_cpu_seconds, max_seconds
        self._cheap: dict[tuple[str, str], bool] = {}  # bounded: 2 endpoints x bounded kind labels

    def on_loop(self, key: tuple[str, str], size: int) -> bool:
        return size <= self.max_bytes and self._cheap.get(key, False)

    def judged(self, key: tuple[str, str], cpu_seconds: float, seconds: float) -> None:
        self._cheap[key] = cpu_seconds <= self.max_cpu_seconds and seconds <= self.max_seconds


class LoopBatch(Generic[T]):
    """Work on the event loop, done a stage at a time for all the requests of a turn.

    The requests whose bodies were read in the same turn of the loop are decoded one
    after the other, then the quick ones judged one after the other, each stage for all of
    them before the next: the decoding code, then the chain's code and data, stay in the
    CPU's caches from one review to the next, instead of each review's chain evicting the
    server's path and the other way round (BENCHMARKS.md, `bench/server_gap.py`).
    Nothing waits for a batch to fill: it is what the loop already had, processed in the
    next turn; a lone review is a batch of one. A batch blocks the loop exactly as long as
    its reviews did one by one; its first review is answered after its last is judged."""

    def __init__(self, *stages: Callable[[T], None]) -> None:
        self.stages = stages
        self._pending: list[tuple[T, asyncio.Future[T]]] = []

    def submit(self, item: T) -> asyncio.Future[T]:
        """``item`` once every stage has run on it, or the exception a stage raised."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        if not self._pending:
            loop.call_soon(self.run)  # after the tasks this turn has already scheduled
        self._pending.append((item, future))
        return future

    def run(self) -> int:
        """Every stage on what is pending, in turn (called once per turn of the loop that
        submitted work); how many requests it took."""
        pending, self._pending = self._pending, []
        for stage in self.stages:
            for item, future in pending:
                if future.done():  # failed at an earlier stage, or its request went away
                    continue
                try:
                    stage(item)
                except Exception as exc:  # a bad review; the others go on
                    future.set_exception(exc)
        for item, future in pending:
            if not future.done():
                future.set_result(item)
        return len(pending)


def failure_result(mode: str, cause: str, message: str) -> AdmissionResult:
    """What the configured failure mode answers when the chain cannot judge in time."""
    if mode == "allow":
        return AdmissionResult(
            allowed=True,
            warnings=[f"infergate did not judge this request ({cause}); allowed by its failure mode"],
            audit_annotations={"failure": cause},
        )
    code, reason = (504, "Timeout") if cause == "timeout" else (500, "InternalError")
    return AdmissionResult(
        allowed=False,
        status={"status": "Failure", "code": code, "reason": reason, "message": message},
        audit_annotations={"failure": cause},
    )


def who(admission: AdmissionRequest) -> dict[str, Any]:
    """The log fields that name a review (never its object)."""
    return {
        "uid": admission.uid,
        "kind": admission.kind.kind,
        "namespace": admission.namespace or None,
        "name": admission.name or None,
        "operation": admission.operation,
        "subresource": admission.subResource or None,
        "user": admission.userInfo.username or None,
        "dry_run": admission.dryRun,
    }


def _timed(admit: Callable[[], AdmissionResult], placement: Placement, key: tuple[str, str]) -> AdmissionResult:
    """``admit()``, telling ``placement`` what it cost (CPU time of the thread running it)."""
    began, began_cpu = time.perf_counter(), time.thread_time()
    try:
        return admit()
    finally:
        placement.judged(key, time.thread_time() - began_cpu, time.perf_counter() - began)


class Scheduler:
    """Judges reviews with the slot's admitter, on the loop or in the pool (``workers``
    threads, started and stopped with the app; 0: always on the loop, never interruptible)."""

    def __init__(self, slot: AdmitterSlot, metrics: Metrics, placement: Placement, *, failure_mode: str,
                 workers: int) -> None:
        self.slot, self.metrics, self.placement = slot, metrics, placement
        self.failure_mode, self.workers = failure_mode, workers
        self.executor: concurrent.futures.ThreadPoolExecutor | None = None

    def start(self) -> None:
        if self.workers:
            self.executor = concurrent.futures.ThreadPoolExecutor(self.workers, thread_name_prefix="admit")

    def stop(self) -> None:
        if self.executor is not None:
            self.executor.shutdown(wait=False, cancel_futures=True)

    def judge_if_quick(self, review: Review) -> None:
        """A :class:`LoopBatch` stage: the verdict, when the chain is ready and ``Placement``
        puts the review on the event loop (else it stays None: :meth:`judge` takes it on)."""
        admitter = self.slot.admitter
        if (admitter is not None and (self.executor is None or self.placement.on_loop(review.key, len(review.body)))
                and self.slot.unmet() is None):
            review.result = self._judged_on_loop(admitter, review.admission, mutating=review.mutating, key=review.key)

    def _judged_on_loop(self, admitter: Admitter, admission: AdmissionRequest, *, mutating: bool,
                        key: tuple[str, str]) -> AdmissionResult:
        try:
            return _timed(functools.partial(admitter.admit, admission, mutating=mutating), self.placement, key)
        except Exception:
            return self._failed(admission, key)

    async def judge(self, admission: AdmissionRequest, *, mutating: bool, deadline: float,
                    key: tuple[str, str]) -> AdmissionResult:
        """The chain's verdict (or the failure mode's answer), waiting for the chain to load
        and judging in the worker pool against ``deadline`` (a ``time.perf_counter()``)."""
        endpoint, kind = key
        mode = self.failure_mode
        admitter = self.slot.admitter or await self.slot.wait(deadline - time.perf_counter())
        if admitter is None:
            self.metrics.policy_errors.labels(endpoint, kind, "not-ready").inc()
            if self.slot.error is not None:
                inputs = ", ".join(self.slot.failed) or "policies"  # readiness checks: policies, cluster-state, ...
                return failure_result(mode, "not-ready", f"infergate could not load its {inputs} (see its logs)")
            return failure_result(mode, "not-ready", "infergate is still loading its policies; try again")
        if (unmet := self.slot.unmet()) is not None:
            self.metrics.policy_errors.labels(endpoint, kind, "not-ready").inc()
            return failure_result(mode, "not-ready", f"infergate cannot judge yet ({unmet}); try again")
        admit = functools.partial(admitter.admit, admission, mutating=mutating)
        try:
            if self.executor is None:
                return admit()
            job = asyncio.get_running_loop().run_in_executor(self.executor, _timed, admit, self.placement, key)
            return await asyncio.wait_for(job, timeout=max(deadline - time.perf_counter(), 0))
        except TimeoutError:
            self.metrics.policy_errors.labels(endpoint, kind, "timeout").inc()
            log.error("admission timed out", extra={"fields": who(admission) | {"endpoint": endpoint}})
            return failure_result(mode, "timeout", "infergate could not judge this request before the apiserver's timeout")
        except Exception:
            return self._failed(admission, key)

    def _failed(self, admission: AdmissionRequest, key: tuple[str, str]) -> AdmissionResult:
        """The failure mode's answer when the chain raised (a bug: logged with its traceback)."""
        endpoint, kind = key
        self.metrics.policy_errors.labels(endpoint, kind, "error").inc()
        log.exception("admission failed", extra={"fields": who(admission) | {"endpoint": endpoint}})
        return failure_result(self.failure_mode, "error",
                              "infergate failed to judge this request (internal error; see its logs)")
