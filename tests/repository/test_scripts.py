"""scripts/serve.sh and scripts/test.sh install only when needed (scripts/lib/venv.sh): with
no .venv yet, or when pyproject.toml changed since the last install; otherwise they start
without pip, so a second start works offline. Run against a stand-in Python that records
what it is asked to do (creating a venv, running pip) instead of doing it."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.paths import REPO

# Stands in for python3 and for .venv/bin/python: records each call; "-m venv DIR" makes DIR/bin/python.
STAND_IN = """#!/usr/bin/env bash
echo "$*" >> "$CALLS"
if [ "$1 $2" = "-m venv" ]; then mkdir -p "$3/bin" && cp "$0" "$3/bin/python"; fi
"""


@pytest.fixture
def checkout(tmp_path):
    root = tmp_path / "checkout"
    (root / "scripts" / "lib").mkdir(parents=True)
    shutil.copy(REPO / "scripts" / "lib" / "venv.sh", root / "scripts" / "lib" / "venv.sh")
    shutil.copy(REPO / "pyproject.toml", root / "pyproject.toml")
    python = tmp_path / "python3"
    python.write_text(STAND_IN)
    python.chmod(0o755)
    return root


def ensure(root: Path, extra: str = "") -> list[str]:
    """The calls one ``ensure_venv EXTRA`` makes."""
    calls = root.parent / "calls"
    calls.write_text("")
    env = dict(os.environ, PYTHON=str(root.parent / "python3"), CALLS=str(calls))
    subprocess.run(["bash", "-c", f". scripts/lib/venv.sh && ensure_venv {extra}"], cwd=root, env=env, check=True)
    return calls.read_text().splitlines()


def test_the_first_start_creates_the_venv_and_installs(checkout):
    assert ensure(checkout) == ["-m venv .venv", "-m pip install -q --upgrade pip", "-m pip install -q -e ."]


def test_a_second_start_installs_nothing(checkout):
    ensure(checkout)
    assert ensure(checkout) == []


def test_a_changed_pyproject_installs_again_into_the_same_venv(checkout):
    ensure(checkout)
    with (checkout / "pyproject.toml").open("a") as f:
        f.write("\n# a new dependency\n")
    assert ensure(checkout) == ["-m pip install -q -e ."]
    assert ensure(checkout) == []


def test_the_test_extra_is_installed_once_and_serves_the_base_too(checkout):
    ensure(checkout)
    assert ensure(checkout, "test") == ["-m pip install -q -e .[test]"]
    assert ensure(checkout, "test") == []
    assert ensure(checkout) == []


def test_a_failed_install_is_retried(checkout):
    python = checkout.parent / "python3"
    python.write_text(STAND_IN + 'if [ "$*" = "-m pip install -q -e ." ]; then exit 1; fi\n')
    with pytest.raises(subprocess.CalledProcessError):
        ensure(checkout)
    python.write_text(STAND_IN)
    shutil.copy(python, checkout / ".venv" / "bin" / "python")
    assert ensure(checkout) == ["-m pip install -q -e ."]


def test_no_tests_collected_fails_ci_loudly(checkout):
    """pytest's exit 5 (no tests collected) stays a failure of scripts/test.sh and so of CI."""
    shutil.copy(REPO / "scripts" / "test.sh", checkout / "scripts" / "test.sh")
    ensure(checkout, "test")
    python = checkout / ".venv" / "bin" / "python"
    python.write_text(STAND_IN + 'if [ "$1 $2" = "-m pytest" ]; then exit 5; fi\n')
    run = subprocess.run(["bash", "scripts/test.sh", "tests/nothing"], cwd=checkout, capture_output=True, text=True,
                         env=dict(os.environ, CALLS=str(checkout.parent / "calls"), CI="true"), stdin=subprocess.DEVNULL)
    assert run.returncode == 5
    assert "collected no tests" in run.stderr
    assert (checkout.parent / "calls").read_text().splitlines()[-1] == "-m pytest tests/nothing"
    assert (REPO / ".ci" / "run").read_text().splitlines()[-1] == "exec ./scripts/test.sh"


def test_the_scripts_use_it():
    for name, call in (("serve.sh", "ensure_venv\n"), ("test.sh", "ensure_venv test\n")):
        text = (REPO / "scripts" / name).read_text()
        assert ". scripts/lib/venv.sh\n" in text and call in text, name
        assert "pip install" not in text, name
