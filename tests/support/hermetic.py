"""The suite stays inside the repository: a test that reads a file outside it fails.

An audit hook sees every file the test process opens or lists (the ``open``,
``os.listdir`` and ``os.scandir`` events, which every read from Python raises). A path
outside the repository is fine when it belongs to the Python installation (stdlib,
site-packages), the operating system (``/usr``, ``/etc``, ``/proc``...) or a temporary
directory. Anything else is data the repository does not carry, and a fresh clone with
nothing beside it would lack it. Data beside the checkout (a sibling directory) never counts
as temporary, even when the checkout itself lives in the temporary directory.

The test that read it fails at teardown, naming the paths; reads outside any test (at
collection) fail the session. Child processes are not audited: they get the paths their
test gives them.
"""

from __future__ import annotations

import os
import site
import sys
import sysconfig
import tempfile
from pathlib import Path

import pytest

from tests.support.paths import REPO

_WATCHED = frozenset({"open", "os.listdir", "os.scandir"})
_SYSTEM = ("/dev", "/proc", "/sys", "/etc", "/usr", "/lib", "/lib64")


def _prefixes(paths) -> tuple[str, ...]:
    return tuple(sorted({os.path.join(os.path.abspath(p), "") for p in paths if p}))


_PYTHON = _prefixes(
    [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, *site.getsitepackages(),
     site.getusersitepackages(), *sysconfig.get_paths().values()]
)
_SCRATCH_OR_SYSTEM = _prefixes([tempfile.gettempdir(), *_SYSTEM])
_repo = REPO
_INSIDE: tuple[str, ...] = ()
_BESIDE: tuple[str, ...] = ()


def confine_to(repo: Path) -> None:
    """Judge reads against ``repo``: inside it is fine; beside it (a sibling of the checkout)
    is not, unless the checkout sits right in the temporary directory or at /."""
    global _repo, _INSIDE, _BESIDE
    _repo = repo
    _INSIDE = _prefixes([repo])
    _BESIDE = tuple(p for p in _prefixes([repo.parent]) if p not in _SCRATCH_OR_SYSTEM and p != os.sep)


confine_to(REPO)

_seen: list[str] = []  # paths read outside, since the last test's teardown
_between: list[str] = []  # ... and those read outside any test


_GIVEN: set[str] = set()  # files the user named for this run (the e2e tests' KUBECONFIG)


def allow(*paths: str) -> None:
    """Let the suite read these files wherever they are: inputs the user gave the run, not
    data the repository lacks."""
    _GIVEN.update(os.path.abspath(p) for p in paths if p)


def outside(path: str) -> bool:
    """Whether an absolute, normalised ``path`` lies outside what the suite may read."""
    if path in _GIVEN:
        return False
    path = os.path.join(path, "")  # a directory matches its own prefix
    if path.startswith(_INSIDE) or path.startswith(_PYTHON):
        return False
    if path.startswith(_BESIDE):
        return True
    return not path.startswith(_SCRATCH_OR_SYSTEM)


def _audit(event: str, args: tuple) -> None:
    if event not in _WATCHED:  # first, and cheap: the hook sees every audit event
        return
    path = args[0]
    if path is None or isinstance(path, int):
        return
    try:
        text = os.path.abspath(os.fsdecode(path))
    except (TypeError, ValueError):
        return
    if outside(text) and os.path.exists(text):
        _seen.append(text)


def reads_outside() -> list[str]:
    """The paths read outside since the last call, sorted, and forget them."""
    taken = sorted(set(_seen))
    _seen.clear()
    return taken


_installed = False


def install() -> None:
    """Start auditing (once per process; an audit hook cannot be removed)."""
    global _installed
    if not _installed:
        _installed = True
        sys.addaudithook(_audit)


def pytest_configure(config):
    install()


def _message(paths: list[str]) -> str:
    listed = "\n".join(f"  {p}" for p in paths[:20])
    return (f"read outside the repository ({_repo}); a fresh clone has none of this:\n{listed}\n"
            "copy the data into the repository (tests/conformance/ for recorded cases) and "
            "reach it through tests/support/paths.py")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    if _seen:  # read between tests (collection, a previous module's teardown): the session reports it
        _between.extend(reads_outside())


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if call.when == "teardown":
        paths = reads_outside()
        if paths and report.passed:
            report.outcome = "failed"
            report.longrepr = _message(paths)


def pytest_sessionfinish(session, exitstatus):
    _between.extend(reads_outside())
    if _between and exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if _between:
        terminalreporter.write_line(_message(sorted(set(_between))), red=True)
