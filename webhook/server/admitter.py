"""What the server judges with: the admission chain behind a one-method interface
(:class:`Admitter`), the slot it is loaded into, and the readiness checks of its inputs."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol

from webhook.admission.review import AdmissionRequest, AdmissionResult

# The readiness check that stands for the chain as a whole (loaded or not).
CHAIN_CHECK = "policies"


class Admitter(Protocol):
    """What the server needs from the admission chain: a pure decision, no I/O."""

    def admit(self, request: AdmissionRequest, *, mutating: bool) -> AdmissionResult: ...


# A readiness check returns None when fine, else why not.
ReadinessCheck = Callable[[], "str | None"]


def run_check(check: ReadinessCheck) -> str | None:
    """``check()``; a check that raises has failed (never a 500 from /readyz)."""
    try:
        return check()
    except Exception as exc:
        return f"check raised {type(exc).__name__}"


class Advisory:
    """A readiness check /readyz reports but that never makes it fail, and reviews do not
    wait for: the admitter still judges (a watch reconnecting: the last synced picture is
    served meanwhile, as an informer's is). Failing readiness on it would take every
    replica out of the Service at once whenever the apiserver restarts."""

    def __init__(self, check: ReadinessCheck):
        self.check = check

    def __call__(self) -> str | None:
        return self.check()


def _failed(problem: str) -> ReadinessCheck:
    return lambda: problem


class AdmitterSlot:
    """The admitter, once loaded, and what it needs before it can judge.

    The server listens (and answers health checks) while the CRDs and policies compile in
    the background; reviews wait for the admitter within their deadline. ``prerequisites``
    are readiness checks of the admitter's inputs (the cluster state synced): /readyz shows
    them, and while one fails reviews get the failure mode rather than a verdict against
    an incomplete picture. ``set``/``fail`` are called on the event loop."""

    def __init__(self, admitter: Admitter | None = None, prerequisites: dict[str, ReadinessCheck] | None = None):
        self._admitter = admitter
        self.prerequisites: dict[str, ReadinessCheck] = dict(prerequisites or {})
        self._loaded = asyncio.Event()
        self.error: str | None = None
        self.failed: dict[str, str] = {}  # readiness check -> why its input did not load
        if admitter is not None:
            self._loaded.set()

    def set(self, admitter: Admitter, prerequisites: dict[str, ReadinessCheck] | None = None) -> None:
        self.prerequisites.update(prerequisites or {})
        self._admitter = admitter
        self._loaded.set()

    def fail(self, error: str, failed: dict[str, str] | None = None) -> None:
        """The chain will not load: ``error`` says why; ``failed`` names, by readiness
        check, the inputs that did not load (default: the chain's own check)."""
        self.error = error
        self.failed = dict(failed or {CHAIN_CHECK: error})
        for name, problem in self.failed.items():
            if name != CHAIN_CHECK:  # shown by /readyz under its own name
                self.prerequisites[name] = _failed(problem)
        self._loaded.set()  # nothing to wait for: reviews get the failure mode at once

    @property
    def admitter(self) -> Admitter | None:
        return self._admitter

    def chain_problem(self) -> str | None:
        """The chain's readiness: None once loaded, else loading or why not."""
        if self._admitter is not None:
            return None
        if self.error is None:
            return "loading"
        if CHAIN_CHECK in self.failed:
            return self.failed[CHAIN_CHECK]
        return f"not loaded: {', '.join(self.failed)} failed"

    async def wait(self, timeout: float) -> Admitter | None:
        if self._admitter is None:
            try:
                await asyncio.wait_for(self._loaded.wait(), max(timeout, 0))
            except TimeoutError:
                pass
        return self._admitter

    def unmet(self) -> str | None:
        """The first prerequisite that fails, as ``name: why``; None when all pass."""
        for name, check in self.prerequisites.items():
            if isinstance(check, Advisory):
                continue
            problem = run_check(check)
            if problem is not None:
                return f"{name}: {problem}"
        return None
