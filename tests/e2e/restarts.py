"""Restarting the cluster's kube-apiserver, timed.

Only the cluster's operator knows how (a bare apiserver: restart its process; kind: restart
the node container), so the command comes from ``INFERGATE_E2E_RESTART_APISERVER``. It must
return once the old process is gone; the apiserver is back when ``/readyz`` answers ok.
"""

from __future__ import annotations

import os
import subprocess
import time
from dataclasses import dataclass

import pytest

from .api import Kube, wait_for

RESTART_HOOK = "INFERGATE_E2E_RESTART_APISERVER"


def restart_command() -> str:
    """The restart command, or the test is skipped saying how to give one."""
    command = os.environ.get(RESTART_HOOK)
    if not command:
        pytest.skip(f"{RESTART_HOOK} not set: give the command that restarts this cluster's apiserver "
                    "(see docs/e2e.md)")
    return command


@dataclass(frozen=True)
class Restart:
    began: float  # time.monotonic() as the command started
    back: float  # when /readyz first answered ok afterwards

    @property
    def downtime(self) -> float:
        return self.back - self.began


def restart_apiserver(kube: Kube, command: str, *, timeout: float = 180) -> Restart:
    began = time.monotonic()
    done = subprocess.run(command, shell=True, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{RESTART_HOOK} failed ({done.returncode}): {done.stderr or done.stdout}"
    wait_for("the apiserver's /readyz ok again", lambda: _readyz_ok(kube), timeout=timeout, interval=0.2)
    return Restart(began, time.monotonic())


def _readyz_ok(kube: Kube) -> bool:
    reply = kube.request("GET", "/readyz", timeout=5)
    return reply.ok
