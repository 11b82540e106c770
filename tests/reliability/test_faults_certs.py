"""Certificate files that vanish, arrive half-written or expire under a serving webhook:
it keeps serving the last good certificate, says so in its logs and readiness, and picks
up the good files once they are back, with no failed request meanwhile."""

from __future__ import annotations

import datetime as dt
import logging
import shutil
import ssl
import threading
from collections import Counter
from pathlib import Path

import pytest

from webhook import certs

from .conftest import Client, RecordingAdmitter, ServerThread, review, wait_until

OBJ = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": "y"}}


class Traffic:
    """Reviews in a loop on fresh connections (each a full handshake, verifying ``ca_pem``)."""

    def __init__(self, server: ServerThread, ca_pem: bytes):
        self.server, self.ca_pem = server, ca_pem
        self.results: Counter = Counter()
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Traffic:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        while not self._stop.is_set():
            client = Client(self.server.port, certs.client_context(self.ca_pem), timeout=5)
            try:
                answer = client.post("/validate", review(OBJ))
                self.results["ok" if answer.status == 200 and answer.json()["response"]["allowed"] else "failed"] += 1
            except (OSError, ssl.SSLError) as exc:
                self.results["failed"] += 1
                self.errors.append(repr(exc))
            finally:
                client.close()


def issue(bundle: certs.CertBundle, *, days: float = 90, now: dt.datetime | None = None) -> certs.CertBundle:
    """A new serving pair from the same CA (what cert-manager does on renewal)."""
    cert, key = certs.issue_serving(bundle.signer, bundle.ca_key, sans=certs.serving_sans(),
                                    now=now or certs.utcnow(), validity=dt.timedelta(days=days))
    return certs.CertBundle(bundle.trusted, bundle.ca_key, cert, key)


@pytest.fixture
def mounted(tmp_path):
    """Files mode: certificates provided by someone else in a directory, watched every 50 ms."""
    cert_dir = tmp_path / "certs"
    first = certs.plan(None, now=certs.utcnow(), sans=certs.serving_sans(), policy=certs.RotationPolicy()).bundle
    certs.DirectoryStore(cert_dir).save(first)
    with ServerThread(cert_dir, RecordingAdmitter(), manage=False, watch_interval=0.05) as server:
        yield server, first


def served_cert(server: ServerThread):
    return server.keeper.served


def readyz(server: ServerThread) -> tuple[int, str]:
    answer = server.client().get("/readyz")
    return answer.status, answer.body.decode()


def test_files_missing_for_a_while_then_back(mounted, caplog):
    server, first = mounted
    with caplog.at_level(logging.ERROR, logger="infergate.certs"), Traffic(server, first.ca_pem()) as traffic:
        wait_until(lambda: traffic.results["ok"] >= 5)
        for name in certs.FILES:
            (server.cert_dir / name).unlink()
        wait_until(lambda: server.keeper.error is not None)
        assert "no certificates to serve" in server.keeper.error
        seen = traffic.results["ok"]
        wait_until(lambda: traffic.results["ok"] >= seen + 5)  # still serving the last good pair
        assert served_cert(server) == first.cert
        assert readyz(server)[0] == 200  # a valid certificate is served: ready
        renewed = issue(first)
        certs.DirectoryStore(server.cert_dir).save(renewed)
        wait_until(lambda: served_cert(server) == renewed.cert)
        seen = traffic.results["ok"]
        wait_until(lambda: traffic.results["ok"] >= seen + 5)
    assert traffic.results["failed"] == 0, traffic.errors[:3]
    assert any("certificate refresh failed" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("damage", ["garbage-cert", "truncated-cert", "key-of-another-cert", "empty-key"])
def test_half_written_or_mismatched_files_keep_the_last_good_pair(mounted, damage):
    server, first = mounted
    stranger = issue(first)
    with Traffic(server, first.ca_pem()) as traffic:
        wait_until(lambda: traffic.results["ok"] >= 3)
        tls_crt, tls_key = server.cert_dir / certs.CERT_FILE, server.cert_dir / certs.KEY_FILE
        if damage == "garbage-cert":
            tls_crt.write_bytes(b"-----BEGIN CERTIFICATE-----\nnot base64 at all\n-----END CERTIFICATE-----\n")
        elif damage == "truncated-cert":
            tls_crt.write_bytes(tls_crt.read_bytes()[:200])
        elif damage == "key-of-another-cert":
            tls_key.write_bytes(stranger.to_files()[certs.KEY_FILE])
        else:
            tls_key.write_bytes(b"")
        wait_until(lambda: server.keeper.error is not None)
        seen = traffic.results["ok"]
        wait_until(lambda: traffic.results["ok"] >= seen + 5)
        assert served_cert(server) == first.cert
        certs.DirectoryStore(server.cert_dir).save(stranger)  # the writer finishes
        wait_until(lambda: served_cert(server) == stranger.cert)
        wait_until(lambda: server.keeper.error is None)
    assert traffic.results["failed"] == 0, traffic.errors[:3]


def test_expired_files_turn_readiness_red(mounted):
    server, first = mounted
    past = certs.utcnow() - dt.timedelta(days=2)
    expired = issue(first, days=1, now=past)
    certs.DirectoryStore(server.cert_dir).save(expired)
    wait_until(lambda: served_cert(server) == expired.cert)
    status, text = readyz_insecure(server)
    assert status == 503 and "[-]certificates failed: serving certificate expired" in text


def readyz_insecure(server: ServerThread) -> tuple[int, str]:
    """The kubelet's view: HTTPS probes do not verify the certificate."""
    ctx = ssl.create_default_context()
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    answer = Client(server.port, ctx).get("/readyz")
    return answer.status, answer.body.decode()


def test_self_managed_directory_wiped_keeps_the_same_ca(tmp_path):
    """Someone deletes certs/ under a self-managed server: it must not start over with a new
    CA, which every client trusting the old bundle (the apiserver's caBundle) would refuse."""
    cert_dir = tmp_path / "certs"
    with ServerThread(cert_dir, RecordingAdmitter(), manage=True, watch_interval=0.05) as server:
        ca_pem = server.ca_pem
        with Traffic(server, ca_pem) as traffic:
            wait_until(lambda: traffic.results["ok"] >= 3)
            shutil.rmtree(cert_dir)
            wait_until(lambda: (cert_dir / certs.CA_FILE).exists())  # rewritten by the keeper
            seen = traffic.results["ok"]
            wait_until(lambda: traffic.results["ok"] >= seen + 5 or traffic.results["failed"] >= 5)
        assert traffic.results["failed"] == 0, traffic.errors[:3]
        assert Path(cert_dir / certs.CA_FILE).read_bytes() == ca_pem
