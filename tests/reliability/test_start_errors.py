"""`infergate serve` as a real process meeting bad input: a path flag naming nothing
usable or a port already taken is one ``infergate: error:`` line and exit 2 (never a
traceback, never a server denying everything); an input that exists but does not load is
named by its own /readyz check."""

from __future__ import annotations

import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.support.paths import REPO
from webhook import certs

from .conftest import review
from tests.support.cel import EVALUATOR


def infergate(*args: str, cwd: Path, **env: str):
    return subprocess.run([sys.executable, "-m", "webhook", "serve", *args], cwd=cwd,
                          env=dict(os.environ, PYTHONPATH=str(REPO), **env), capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("flag, make, problem", [
    ("--state-dir", lambda tmp: tmp / "nonexistent", "no such directory"),
    ("--policies-dir", lambda tmp: tmp / "nonexistent", "no such directory"),
    ("--crds-dir", lambda tmp: tmp / "nonexistent", "no such file or directory"),
    ("--state-dir", lambda tmp: (tmp / "file.yaml").touch() or tmp / "file.yaml", "not a directory"),
    ("--policies-dir", lambda tmp: (tmp / "file.yaml").touch() or tmp / "file.yaml", "not a directory"),
])
def test_a_bad_path_flag_is_one_line_and_exit_2(tmp_path, flag, make, problem):
    path = make(tmp_path)
    done = infergate("--port", "0", flag, str(path), cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [f"infergate: error: {flag} {path}: {problem}"]
    assert done.stdout == "" and not (tmp_path / "certs").exists()  # nothing started


def test_every_bad_path_is_named_at_once(tmp_path):
    done = infergate("--state-dir", "/nonexistent", "--crds-dir", "/nonexistent-crds", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.splitlines() == ["infergate: error: --crds-dir /nonexistent-crds: no such file or directory",
                                        "infergate: error: --state-dir /nonexistent: no such directory"]


def test_a_bad_path_from_the_environment_is_refused_too(tmp_path):
    done = infergate(cwd=tmp_path, INFERGATE_STATE_DIR="/nonexistent")
    assert done.returncode == 2 and done.stderr.splitlines() == [
        "infergate: error: --state-dir /nonexistent: no such directory"]


@pytest.mark.parametrize("value, problem", [
    ("kubeai-model-engin=Warn", "--policy-actions: no policy named 'kubeai-model-engin' "
                                "(did you mean 'kubeai-model-engine'?)"),
    ("kubeai-model-engine=Deny,Warn", "--policy-actions kubeai-model-engine=Deny,Warn: actions: Invalid value: "
                                      '["Deny","Warn"]: must not contain both Deny and Warn'),
    ("kubeai-model-engine=Warn@team in a", "--policy-actions kubeai-model-engine=Warn@team in a: namespaceSelector: "
                                           "expected '(' after 'in' in 'team in a'"),
])
def test_bad_policy_actions_are_one_line_and_exit_2(tmp_path, value, problem):
    done = infergate("--port", "0", "--policy-actions", value, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"infergate: error: {problem}")
    assert done.stdout == "" and not (tmp_path / "certs").exists()  # nothing started


def test_policy_actions_from_the_environment_are_checked_too(tmp_path):
    done = infergate(cwd=tmp_path, INFERGATE_POLICY_ACTIONS='["kubeai-model-engine=Warn", "nope=Audit"]')
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith("infergate: error: --policy-actions: no policy named 'nope' (")


def test_a_port_in_use_is_one_line_and_exit_2(tmp_path):
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        done = infergate("--host", "127.0.0.1", "--port", str(port), cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert done.stderr.splitlines() == [f"infergate: error: cannot listen on 127.0.0.1:{port}: address already in use "
                                        "(another process listens there; pick another with --port)"]


def readyz(port: int, ctx: ssl.SSLContext) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"https://localhost:{port}/readyz", context=ctx, timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_state_that_does_not_load_is_named_by_readyz_as_the_cluster_state(tmp_path):
    """The state directory exists, so serve starts; one of its files is broken, so the chain
    cannot be built: /readyz names ``cluster-state`` (not ``policies``, which loaded), and
    reviews are answered at once by the failure mode, saying what did not load."""
    state = tmp_path / "state"
    state.mkdir()
    (state / "broken.yaml").write_text("kind: ConfigMap\nmetadata: [unclosed\n")
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.Popen([sys.executable, "-m", "webhook", "serve", "--host", "127.0.0.1", "--port", "0",
                             "--state-dir", str(state)], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        banner = proc.stdout.readline()
        assert banner.startswith("infergate serving https://127.0.0.1:"), banner + proc.stderr.read()
        port = int(banner.split(":", 2)[2].split(" ")[0])
        ctx = certs.client_context((tmp_path / "certs" / "ca.crt").read_bytes())
        deadline = time.monotonic() + 60
        while "[-]cluster-state" not in (answer := readyz(port, ctx))[1]:
            assert time.monotonic() < deadline, answer
            time.sleep(0.1)
        status, text = answer
        lines = text.splitlines()
        assert status == 503 and lines[0] == "[+]certificates ok" and lines[-1] == "readyz check failed"
        assert "[-]policies failed: not loaded: cluster-state failed" in lines
        failed = [line for line in lines if line.startswith("[-]cluster-state failed: ")]
        assert len(failed) == 1 and failed[0].startswith(f"[-]cluster-state failed: StateLoadError: {state / 'broken.yaml'}"), lines
        body = json.dumps(review({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "b"}},
                                 uid="u1")).encode()
        request = urllib.request.Request(f"https://localhost:{port}/validate", data=body,
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, context=ctx, timeout=10) as r:
            response = json.loads(r.read())["response"]
        assert response["allowed"] is False and response["status"]["code"] == 500
        assert response["status"]["message"] == "infergate could not load its cluster-state (see its logs)"
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    logged = [json.loads(line) for line in err.splitlines()]
    failure = next(e for e in logged if e["msg"] == "cannot load the admission chain")
    assert failure["level"] == "error" and list(failure["failed"]) == ["cluster-state"]
    assert "exception" not in failure  # the input's error says it all: no traceback


def test_every_input_that_does_not_load_is_named_and_nothing_is_started(tmp_path):
    import threading

    from webhook.server import InputsFailed, load_admitter
    from webhook.server.settings import Settings

    crds, state = tmp_path / "crds", tmp_path / "state"
    crds.mkdir()
    state.mkdir()
    (crds / "bad.yaml").write_text("kind: CustomResourceDefinition\nspec: {\n")
    (state / "bad.yaml").write_text("- not an object\n")
    reloaders = [t for t in threading.enumerate() if t.name == "policy-reload"]  # other tests' servers
    with pytest.raises(InputsFailed) as failed:
        load_admitter(Settings(crds_dir=crds, state_dir=state), EVALUATOR)
    assert list(failed.value.failed) == ["crds", "cluster-state"]  # the shipped policies loaded
    # each as its loader words it, naming the file
    assert failed.value.failed["crds"].startswith(f"CRDLoadError: {crds / 'bad.yaml'}")
    assert failed.value.failed["cluster-state"].startswith(f"StateLoadError: {state / 'bad.yaml'}")
    assert [t for t in threading.enumerate() if t.name == "policy-reload"] == reloaders  # this one's not started
