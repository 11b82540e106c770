"""``infergate serve`` and ``infergate controller`` as the user runs them: subprocesses of
this worktree's code, logs to files (shown when a test fails), stopped with SIGTERM."""

from __future__ import annotations

import datetime as dt
import os
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from webhook import certs

from .cluster import REPO


def infergate(*args: str) -> list[str]:
    """The ``infergate`` command line of this checkout (``python -m webhook``)."""
    return [sys.executable, "-m", "webhook", *args]


def run_infergate(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(infergate(*args), cwd=REPO, env=_env(), capture_output=True, text=True, timeout=timeout)


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Process:
    name: str
    popen: subprocess.Popen
    log: Path

    def alive(self) -> bool:
        return self.popen.poll() is None

    def tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self, timeout: float = 30) -> int:
        """SIGTERM (graceful: in-flight work finishes, the Lease is released), then SIGKILL."""
        if self.alive():
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()
        return self.popen.returncode


def start(name: str, args: Sequence[str], log_dir: Path, *, env: dict[str, str] | None = None) -> Process:
    log = log_dir / f"{name}.log"
    out = log.open("ab")
    popen = subprocess.Popen(infergate(*args), cwd=REPO, env={**_env(), **(env or {})},
                             stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    out.close()
    return Process(name, popen, log)


# -- the webhook --------------------------------------------------------------------------


def generate_certs(cert_dir: Path) -> Path:
    """``infergate certs generate``: a CA and a serving certificate for localhost/127.0.0.1."""
    result = run_infergate("certs", "generate", "--dir", str(cert_dir))
    if result.returncode:
        raise RuntimeError(f"infergate certs generate failed: {result.stderr}")
    return cert_dir / certs.CA_FILE


def start_serve(name: str, cert_dir: Path, log_dir: Path, *, extra: Sequence[str] = (),
                ready: str = "/readyz") -> tuple[Process, int]:
    """``infergate serve`` on a free loopback port, serving (and reloading) the certificates in
    ``cert_dir`` (``--cert-mode files``: the tests rotate them); returns once ``ready`` (/readyz:
    admission chain loaded; /healthz: listening) answers 200."""
    port = free_port()
    process = start(name, ["serve", "--host", "127.0.0.1", "--port", str(port), "--cert-mode", "files",
                           "--cert-dir", str(cert_dir), *extra], log_dir,
                    env={"INFERGATE_CERT_WATCH_INTERVAL": "0.2"})
    wait_ready(process, f"https://127.0.0.1:{port}{ready}", cert_dir / certs.CA_FILE)
    return process, port


def wait_ready(process: Process, url: str, ca_file: Path, timeout: float = 60) -> None:
    context = ssl.create_default_context(cafile=str(ca_file))
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        if not process.alive():
            raise RuntimeError(f"{process.name} exited ({process.popen.returncode}):\n{process.tail()}")
        try:
            with urllib.request.urlopen(url, context=context, timeout=2) as response:
                if response.status == 200:
                    return
        except OSError as exc:
            last = str(exc)
        time.sleep(0.2)
    raise RuntimeError(f"{process.name} not ready after {timeout}s ({last}):\n{process.tail()}")


def get(url: str, ca_file: Path, timeout: float = 5) -> tuple[int, str]:
    """HTTP status and body of a GET over TLS trusting ``ca_file`` (an error status too)."""
    context = ssl.create_default_context(cafile=str(ca_file))
    try:
        with urllib.request.urlopen(url, context=context, timeout=timeout) as response:
            return response.status, response.read().decode(errors="replace")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(errors="replace")


def serves(port: int, cert_dir: Path) -> bool:
    """Whether the webhook on ``port`` presents the certificate now in ``cert_dir``."""
    presented = ssl.get_server_certificate(("127.0.0.1", port))
    return ssl.PEM_cert_to_DER_cert(presented) == ssl.PEM_cert_to_DER_cert((cert_dir / certs.CERT_FILE).read_text())


def reissue_serving(cert_dir: Path, ca, ca_key, trusted) -> None:
    """Write a new serving certificate (new key) signed by ``ca``, with the bundle ``trusted``,
    as cert-manager or the kubelet rewrites a mounted Secret: the webhook reloads it."""
    cert, key = certs.issue_serving(ca, ca_key, sans=certs.serving_sans(), now=certs.utcnow(),
                                    validity=dt.timedelta(days=1))
    certs.DirectoryStore(cert_dir).save(certs.CertBundle(tuple(trusted), ca_key, cert, key))


# -- the controller -----------------------------------------------------------------------

# Short replan settings, so that a stuck ResourceClaim is seen within a test (docs/decisions.md, InferenceService 8).
REPLAN_TIMEOUT_S, REPLAN_LIMIT = 4, 1


def start_controller(name: str, kubeconfig: str, log_dir: Path, *, lease_namespace: str, lease_name: str,
                     extra: Sequence[str] = ()) -> Process:
    return start(name, ["controller", "--kubeconfig", kubeconfig, "--identity", name,
                        "--lease-namespace", lease_namespace, "--lease-name", lease_name,
                        "--replan-timeout", str(REPLAN_TIMEOUT_S), "--replan-limit", str(REPLAN_LIMIT),
                        "--log-level", "DEBUG", *extra], log_dir)
