"""The repository stands on its own: a clone with nothing beside it names nothing outside
itself, its recorded-case suites run from it, and a test that reads outside the repository
fails (``tests/support/hermetic.py``)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

from tests.support import hermetic
from tests.support.paths import REPO

# Written so that this file does not match them itself.
BESIDE_PATTERNS = (r"\.\./shared", r"shared/(spec|reference|cases|seeds)")


def test_what_counts_as_outside():
    assert not hermetic.outside(str(REPO / "tests" / "conformance" / "cases" / "kubeai-model.yaml"))
    assert not hermetic.outside(str(REPO))
    assert not hermetic.outside(os.path.join(sys.base_prefix, "lib", "json", "__init__.py"))
    assert not hermetic.outside("/etc/ssl/certs/ca-certificates.crt")
    assert not hermetic.outside(os.path.join(tempfile.gettempdir(), "pytest-of-someone", "x"))
    assert hermetic.outside("/srv/data/decisions.md")
    # a prefix of the name is not inside (judged for a checkout at a fixed place: beside one
    # that sits right in the temporary directory lies scratch space, see ``confine_to``)
    try:
        hermetic.confine_to(Path("/srv/checkouts/infergate"))
        assert hermetic.outside("/srv/checkouts/infergate-old/README.md")
        assert not hermetic.outside("/srv/checkouts/infergate/README.md")
    finally:
        hermetic.confine_to(REPO)


def _run_pytest(where: Path, *files: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "tests.support.hermetic", "-p", "no:cacheprovider", "-q", *files],
        cwd=where, env=dict(os.environ, PYTHONPATH=str(REPO)), capture_output=True, text=True, timeout=120)


@pytest.fixture
def checkout_with_data_beside(tmp_path):
    """``work/checkout`` (a pytest rootdir judged as the repository) and ``work/shared`` beside it."""
    checkout, beside = tmp_path / "work" / "checkout", tmp_path / "work" / "shared"
    checkout.mkdir(parents=True)
    beside.mkdir()
    (beside / "decisions.md").write_text("# beside\n")
    (checkout / "inside.md").write_text("# inside\n")
    (checkout / "pytest.ini").write_text("[pytest]\n")
    (checkout / "conftest.py").write_text(textwrap.dedent("""
        from pathlib import Path
        from tests.support import hermetic
        hermetic.confine_to(Path(__file__).parent)
    """))
    (checkout / "test_inside.py").write_text(textwrap.dedent("""
        from pathlib import Path
        def test_reads_inside():
            assert (Path(__file__).parent / "inside.md").read_text() == "# inside\\n"
    """))
    return checkout


def test_a_test_reading_beside_the_checkout_fails(checkout_with_data_beside):
    (checkout_with_data_beside / "test_beside.py").write_text(textwrap.dedent("""
        from pathlib import Path
        def test_reads_beside():
            assert (Path(__file__).parent.parent / "shared" / "decisions.md").read_text()
    """))
    run = _run_pytest(checkout_with_data_beside, "test_inside.py", "test_beside.py")
    assert run.returncode == 1, run.stdout + run.stderr
    assert "2 passed, 1 error" in run.stdout, run.stdout
    assert "ERROR test_beside.py::test_reads_beside" in run.stdout, run.stdout
    assert str(checkout_with_data_beside.parent / "shared" / "decisions.md") in run.stdout
    assert "inside.md" not in run.stdout


def test_a_read_beside_the_checkout_while_collecting_fails_the_session(checkout_with_data_beside):
    (checkout_with_data_beside / "test_collecting.py").write_text(textwrap.dedent("""
        from pathlib import Path
        DECISIONS = (Path(__file__).parent.parent / "shared" / "decisions.md").read_text()
        def test_nothing_else():
            assert DECISIONS
    """))
    run = _run_pytest(checkout_with_data_beside, "test_inside.py", "test_collecting.py")
    assert run.returncode == 1, run.stdout + run.stderr
    assert "2 passed" in run.stdout and "read outside the repository" in run.stdout, run.stdout


# Run inside the clone: the recorded-case suites through `infergate test`, audited against the clone.
_IN_THE_CLONE = """
import json, sys
from tests.support import hermetic
hermetic.install()
import webhook
from webhook.cli import main
code = main(["test", "tests/conformance/cases"])
print(json.dumps({"code": code, "webhook": webhook.__file__, "outside": hermetic.reads_outside()}))
"""


@pytest.mark.skipif(shutil.which("git") is None or not (REPO / ".git").exists(), reason="needs git and a git checkout")
def test_a_fresh_clone_refers_to_nothing_outside_it(tmp_path):
    clone = tmp_path / "infergate"  # tmp_path holds nothing else
    subprocess.run(["git", "clone", "--quiet", str(REPO), str(clone)], check=True, timeout=120)

    for pattern in BESIDE_PATTERNS:
        grep = subprocess.run(["git", "-C", str(clone), "grep", "-n", "-E", pattern], capture_output=True, text=True)
        assert grep.returncode == 1, f"tracked files name data beside the checkout:\n{grep.stdout}{grep.stderr}"
    grep = subprocess.run(["git", "-C", str(clone), "grep", "-n", "-F", str(REPO)], capture_output=True, text=True)
    assert grep.returncode == 1, f"tracked files name the checkout's own path:\n{grep.stdout}{grep.stderr}"

    run = subprocess.run([sys.executable, "-c", _IN_THE_CLONE], cwd=clone, capture_output=True, text=True,
                         env=dict(os.environ, PYTHONPATH=str(clone)), timeout=300)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    lines = run.stdout.splitlines()
    answer = json.loads(lines[-1])
    assert answer["webhook"].startswith(str(clone) + os.sep)
    assert answer["outside"] == []
    assert answer["code"] == 0, "\n".join(lines[-20:])
    summary = lines[-2]
    assert summary.endswith(" passed, 0 failed") and int(summary.split()[0]) >= 600, summary
