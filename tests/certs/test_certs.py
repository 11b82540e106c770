"""The certificate lifecycle: issuance, staged rotation (clock travels), stores, watcher."""

from __future__ import annotations

import datetime as dt
import os
import ssl
import subprocess
import sys

import pytest
from cryptography import x509

from webhook import certs

T0 = dt.datetime(2030, 1, 1, tzinfo=dt.timezone.utc)
SANS = certs.serving_sans("infergate/infergate-webhook")
POLICY = certs.RotationPolicy(
    ca_validity=dt.timedelta(days=30), serving_validity=dt.timedelta(days=9),
    overlap=dt.timedelta(hours=6),
)


def verifies(cert: x509.Certificate, bundle_pem: bytes) -> bool:
    """Does a client trusting ``bundle_pem`` accept ``cert`` (as the apiserver would)?"""
    return any(certs.signed_by(cert, ca) for ca in x509.load_pem_x509_certificates(bundle_pem))


def test_sans_cover_localhost_and_the_service_dns_names():
    assert SANS == (
        "localhost", "127.0.0.1", "infergate-webhook", "infergate-webhook.infergate",
        "infergate-webhook.infergate.svc", "infergate-webhook.infergate.svc.cluster.local",
    )
    with pytest.raises(ValueError, match="NAMESPACE/NAME"):
        certs.serving_sans("no-slash")


def test_fresh_bundle_is_a_ca_and_a_serving_cert_for_the_names():
    p = certs.plan(None, now=T0, sans=SANS, policy=POLICY)
    b = p.bundle
    assert p.changed and len(b.trusted) == 1
    assert b.signer.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    san = b.cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == [n for n in SANS if n != "127.0.0.1"]
    assert [str(ip) for ip in san.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    assert verifies(b.cert, b.ca_pem())
    # a second look changes nothing
    assert not certs.plan(b, now=T0 + dt.timedelta(days=1), sans=SANS, policy=POLICY).changed


def test_serving_cert_renewed_by_the_same_ca_when_a_third_of_its_life_is_left():
    b = certs.plan(None, now=T0, sans=SANS, policy=POLICY).bundle
    p = certs.plan(b, now=T0 + dt.timedelta(days=6, hours=1), sans=SANS, policy=POLICY)
    assert p.actions == ("serving certificate due for renewal",)
    assert p.bundle.signer == b.signer and p.bundle.cert != b.cert
    assert verifies(p.bundle.cert, b.ca_pem())  # the old bundle already trusts it


def test_changed_names_reissue_the_serving_cert():
    b = certs.plan(None, now=T0, sans=SANS, policy=POLICY).bundle
    p = certs.plan(b, now=T0, sans=("localhost", "127.0.0.1", "webhook.example"), policy=POLICY)
    assert p.actions == ("serving certificate names changed",)


def test_ca_rotation_is_staged_so_lagging_clients_and_replicas_always_verify():
    """Walk the clock across two CA rotations. A change takes up to ``overlap`` to reach
    every apiserver (the caBundle) and every replica (the mounted Secret): so at every
    moment, every certificate served during the last ``overlap`` must verify against
    every bundle in use during the last ``overlap``."""
    bundle = certs.plan(None, now=T0, sans=SANS, policy=POLICY).bundle
    history = [(T0, bundle)]  # (since, state)
    seen = []
    now = T0
    while now < T0 + dt.timedelta(days=60):
        now += dt.timedelta(hours=2)
        p = certs.plan(history[-1][1], now=now, sans=SANS, policy=POLICY)
        if p.changed:
            seen.extend(p.actions)
            history.append((now, p.bundle))
        window = [b for i, (since, b) in enumerate(history)
                  if i + 1 == len(history) or history[i + 1][0] > now - POLICY.overlap]
        for served in window:
            assert served.cert.not_valid_after_utc > now
            for trusted in window:
                assert verifies(served.cert, trusted.ca_pem()), (now, seen[-3:])
    assert seen.count("appended a new CA to the bundle") >= 2
    # the three stages in order, each at least an overlap apart
    first = seen.index("appended a new CA to the bundle")
    assert seen[first: first + 3] == [
        "appended a new CA to the bundle", "serving certificate moved to the new CA",
        "removed the previous CA from the bundle",
    ]
    stage_times = [since for since, b in history[1:]]
    assert all(b - a >= POLICY.overlap for a, b in zip(stage_times, stage_times[1:]))


def test_expired_ca_is_dropped_and_broken_serving_cert_replaced():
    b = certs.plan(None, now=T0, sans=SANS, policy=POLICY).bundle
    other = certs.plan(None, now=T0, sans=SANS, policy=POLICY).bundle
    foreign = certs.CertBundle(b.trusted, b.ca_key, other.cert, other.key)
    p = certs.plan(foreign, now=T0, sans=SANS, policy=POLICY)
    assert p.actions == ("serving certificate not signed by a trusted CA",)
    assert verifies(p.bundle.cert, b.ca_pem())
    # an expired old CA leaves the bundle even if stage 3 never ran
    stale = certs.CertBundle((other.signer,) + b.trusted, b.ca_key, b.cert, b.key)
    later = T0 + dt.timedelta(days=31)
    p = certs.plan(stale, now=later, sans=SANS, policy=POLICY)
    assert p.actions[0] == "dropped expired CA from the bundle"


def test_directory_store_roundtrip_private_keys_and_mismatch_detection(tmp_path):
    store = certs.DirectoryStore(tmp_path / "certs")
    assert store.load() is None
    b = certs.plan(None, now=certs.utcnow(), sans=SANS, policy=POLICY).bundle
    store.save(b)
    assert store.load().to_files() == b.to_files()
    for name in certs.FILES:
        mode = (tmp_path / "certs" / name).stat().st_mode & 0o777
        assert mode == (0o600 if name.endswith(".key") else 0o644)
    other = certs.plan(None, now=certs.utcnow(), sans=SANS, policy=POLICY).bundle
    (tmp_path / "certs" / "tls.key").write_bytes(other.to_files()["tls.key"])
    with pytest.raises(certs.CertError, match="tls.key does not belong to tls.crt"):
        store.load()
    (tmp_path / "certs" / "tls.crt").write_bytes(b"-----BEGIN CERTIFICATE-----\ngarbage\n")
    with pytest.raises(certs.CertError, match="unreadable"):
        store.load()
    (tmp_path / "certs" / "tls.crt").unlink()
    with pytest.raises(certs.CertError, match="missing tls.crt"):
        store.load()


def test_watcher_detects_the_kubelet_symlink_swap(tmp_path):
    """A mounted Secret: files are links into ``..data``, itself a link to a timestamped
    directory; an update renames a new ``..data`` over the old one."""
    def write_version(name: str, bundle: certs.CertBundle) -> None:
        version = tmp_path / name
        version.mkdir()
        for fname, data in bundle.to_files().items():
            (version / fname).write_bytes(data)
        tmp_link = tmp_path / "..data_tmp"
        tmp_link.symlink_to(name)
        os.replace(tmp_link, tmp_path / "..data")

    first = certs.plan(None, now=certs.utcnow(), sans=SANS, policy=POLICY).bundle
    write_version("..2030_01_01_00_00_00.1", first)
    for fname in certs.FILES:
        (tmp_path / fname).symlink_to(f"..data/{fname}")
    store = certs.DirectoryStore(tmp_path)
    watcher = certs.FileWatcher(tmp_path / f for f in certs.FILES)
    assert store.load().to_files() == first.to_files() and not watcher.changed()

    second = certs.plan(None, now=certs.utcnow(), sans=SANS, policy=POLICY).bundle
    write_version("..2030_01_02_00_00_00.2", second)
    assert watcher.changed()
    assert store.load().to_files() == second.to_files()
    assert not watcher.changed()


def test_server_context_is_tls12_plus_with_aead_suites():
    b = certs.plan(None, now=certs.utcnow(), sans=SANS, policy=POLICY).bundle
    ctx = certs.server_context(b)
    assert ctx.minimum_version == ssl.TLSVersion.TLSv1_2
    tls12 = [c for c in ctx.get_ciphers() if c["protocol"] == "TLSv1.2"]
    assert tls12 and all(c["aead"] and c["kea"] == "kx-ecdhe" for c in tls12)


def test_certs_generate_command_is_idempotent_and_force_starts_over(tmp_path):
    def cli(*args):
        return subprocess.run([sys.executable, "-m", "webhook", "certs", *args], capture_output=True, text=True)

    out = cli("generate", "--dir", str(tmp_path), "--service", "ns/svc", "--san", "webhook.example")
    assert out.returncode == 0, out.stderr
    assert "created CA and serving certificate" in out.stdout
    b = certs.DirectoryStore(tmp_path).load()
    assert "svc.ns.svc" in certs.subject_alt_names(b.cert) and "webhook.example" in certs.subject_alt_names(b.cert)

    again = cli("generate", "--dir", str(tmp_path), "--service", "ns/svc", "--san", "webhook.example")
    assert "nothing to do" in again.stdout and certs.DirectoryStore(tmp_path).load().to_files() == b.to_files()
    forced = cli("generate", "--dir", str(tmp_path), "--force")
    assert certs.DirectoryStore(tmp_path).load().signer != b.signer, forced.stderr
    shown = cli("show", "--dir", str(tmp_path))
    assert shown.returncode == 0 and "CA (signer)" in shown.stdout
    (tmp_path / "ca.key").write_text("nope")
    broken = cli("show", "--dir", str(tmp_path))
    assert broken.returncode == 2 and "Traceback" not in broken.stderr and "unreadable" in broken.stderr
    assert broken.stderr.startswith("infergate: error: certs: ")
