"""``bench/controller_converge.py`` drives the runner through an in-process API of its own:
at a small scale it must converge and then resync without a write, or its figures in
BENCHMARKS.md could not be reproduced (an API missing a call the runner makes retries
forever instead of failing)."""

from __future__ import annotations

import subprocess
import sys

from tests.support.paths import REPO


def test_the_converge_benchmark_runs_the_runner_to_a_quiet_resync():
    done = subprocess.run(
        [sys.executable, str(REPO / "bench" / "controller_converge.py"),
         "--orders", "40", "--classes", "4", "--device-classes", "4"],
        capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "converge (runner, cold start; 44 status writes)" in done.stdout
    assert "(full resync, 44 reconciles; 0 status writes)" in done.stdout
    assert "not written" not in done.stderr
