"""``bench/reliability_soak.py`` sends every example manifest, of every kind, to a real
``infergate serve``: a short run of it must pass, or its figures in BENCHMARKS.md could not
be reproduced (a kind it cannot address stops it before the first request)."""

from __future__ import annotations

import subprocess
import sys

from tests.support.paths import REPO


def test_a_short_soak_answers_every_example_without_an_error():
    done = subprocess.run(
        [sys.executable, str(REPO / "bench" / "reliability_soak.py"),
         "--minutes", "0.05", "--rate", "40", "--warmup", "1", "--sample-every", "1"],
        capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    assert done.stdout.rstrip().endswith("PASS")
    assert '"errors": 0' in done.stdout
