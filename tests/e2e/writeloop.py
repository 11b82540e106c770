"""Writes kept going while the cluster is disrupted: ``kubectl create --dry-run=server`` of a
valid object and of an object the webhook denies, in turn, in a background thread, every
answer classified and timed.

A valid object must be admitted and the invalid one denied with the webhook's own words
(exactly what kubectl prints of the webhook's denial); every other outcome is an error:
a refused connection, a timeout, "failed calling webhook", a valid object refused or an
invalid one admitted. Errors of calls made while the apiserver itself is away (any moment of
the call between the start of its restart and its ``/readyz`` answering ok again) are counted
apart: the webhook cannot be blamed for them; so are errors a run names as the apiserver's own
refusal (``Tally.apiserver_refusals``).
"""

from __future__ import annotations

import shutil
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

import yaml


@dataclass(frozen=True)
class Answer:
    sent: float  # time.monotonic() when kubectl started
    at: float  # when its answer came back
    valid: bool  # which of the two objects was sent
    error: str | None  # None: the expected outcome


@dataclass
class Tally:
    """The answers of one stretch of the loop."""

    answers: list[Answer]
    apiserver_down: list[tuple[float, float]] = field(default_factory=list)
    # errors that are the apiserver's own refusal, never a webhook's: texts they contain
    apiserver_refusals: tuple[str, ...] = ()

    def _refused_by_the_apiserver(self, answer: Answer) -> bool:
        return any(text in (answer.error or "") for text in self.apiserver_refusals)

    def _during_downtime(self, answer: Answer) -> bool:
        """Whether the apiserver was away at some moment of the call: a kubectl started just
        before its port opens is refused, and may answer just after /readyz passes."""
        return any(answer.sent <= end and answer.at >= begin for begin, end in self.apiserver_down)

    @property
    def sent(self) -> int:
        return len(self.answers)

    @property
    def errors(self) -> list[Answer]:
        """Unexpected outcomes while the apiserver was up: the ones that count."""
        return [a for a in self.answers if a.error and not self._during_downtime(a)
                and not self._refused_by_the_apiserver(a)]

    @property
    def apiserver_refused(self) -> list[Answer]:
        """Errors after the downtime that are the apiserver's own refusal (``apiserver_refusals``)."""
        return [a for a in self.answers if a.error and not self._during_downtime(a) and self._refused_by_the_apiserver(a)]

    @property
    def downtime_errors(self) -> list[Answer]:
        return [a for a in self.answers if a.error and self._during_downtime(a)]

    def admitted_and_denied(self) -> tuple[int, int]:
        good = [a for a in self.answers if a.error is None]
        return sum(a.valid for a in good), sum(not a.valid for a in good)

    def summary(self) -> str:
        admitted, denied = self.admitted_and_denied()
        kinds = Counter(_first_line(a.error) for a in self.errors)
        text = (f"{self.sent} writes: {admitted} admitted, {denied} denied by the webhook, "
                f"{len(self.errors)} errors, {len(self.downtime_errors)} during the apiserver's own downtime"
                + (f", {len(self.apiserver_refused)} refused by the apiserver itself" if self.apiserver_refused else ""))
        return text + (f"; errors: {dict(kinds)}" if kinds else "")


def _first_line(text: str | None) -> str:
    return (text or "").strip().splitlines()[0][:200] if text and text.strip() else "(empty)"


class WriteLoop:
    """``kubectl create --dry-run=server`` of ``valid`` and ``invalid`` in turn until stopped.

    ``denial`` holds what kubectl must print of the invalid object's refusal (every line);
    ``mark()`` returns the answers so far, so one loop can be cut into stretches."""

    def __init__(self, kubeconfig: str, valid: dict, invalid: dict, denial: Iterable[str], *, timeout: float = 60):
        kubectl = shutil.which("kubectl")
        if kubectl is None:
            raise RuntimeError("the write loop runs kubectl: put kubectl on PATH")
        self.command = [kubectl, "--kubeconfig", kubeconfig, "create", "--dry-run=server", "-f", "-", "-o", "name"]
        self.documents = {True: yaml.safe_dump(valid), False: yaml.safe_dump(invalid)}
        self.denial = list(denial)
        self.timeout = timeout
        self.answers: list[Answer] = []
        self.apiserver_down: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="write-loop", daemon=True)

    def _run(self) -> None:
        valid = True
        while not self._stop.is_set():
            sent = time.monotonic()
            error = self._one(valid)
            self.answers.append(Answer(sent, time.monotonic(), valid, error))
            valid = not valid

    def _one(self, valid: bool) -> str | None:
        try:
            result = subprocess.run(self.command, input=self.documents[valid], capture_output=True, text=True,
                                    timeout=self.timeout)
        except subprocess.TimeoutExpired:
            return f"kubectl timed out after {self.timeout:g}s"
        if valid:
            return None if result.returncode == 0 else result.stderr.strip() or f"exit {result.returncode}"
        if result.returncode == 0:
            return "an invalid object was admitted"
        missing = [line for line in self.denial if line not in result.stderr]
        return None if not missing else result.stderr.strip() or f"exit {result.returncode}"

    def __enter__(self) -> WriteLoop:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(self.timeout + 10)

    def mark(self) -> int:
        """Where the answers stand now (an index for :meth:`since`)."""
        return len(self.answers)

    def since(self, mark: int, *, apiserver_refusals: tuple[str, ...] = ()) -> Tally:
        return Tally(self.answers[mark:], list(self.apiserver_down), apiserver_refusals)

    def wait_for_answers(self, count: int, timeout: float = 60) -> None:
        """Until ``count`` more answers came back (the loop is running and answered)."""
        goal, deadline = len(self.answers) + count, time.monotonic() + timeout
        while len(self.answers) < goal:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise AssertionError(f"the write loop gave {len(self.answers)} answers, waited for {goal}")
            time.sleep(0.1)
