"""The TLS configuration as a real client sees it: protocol versions, cipher suites, mTLS.

Every refusal below is shown to be the server's: the same client context first completes
a handshake with a permissive server (any version, any suite), then fails against infergate.
"""

from __future__ import annotations

import datetime as dt
import shutil
import socket
import subprocess
import ssl
import threading
from collections.abc import Iterator

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from webhook import certs

from .conftest import RecordingAdmitter, ServerThread, review

pytestmark = pytest.mark.filterwarnings("ignore:ssl.TLSVersion.TLSv1:DeprecationWarning")

# What infergate may negotiate: TLS 1.2 with ECDHE key exchange and an AEAD cipher (its
# certificate is ECDSA), or any TLS 1.3 suite (all AEAD, all forward secret).
ALLOWED_TLS12 = {"ECDHE-ECDSA-AES128-GCM-SHA256", "ECDHE-ECDSA-AES256-GCM-SHA384", "ECDHE-ECDSA-CHACHA20-POLY1305"}
ALLOWED_TLS13 = {"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256"}


def permissive_client(ca_pem: bytes, version: ssl.TLSVersion | None = None, ciphers: str = "ALL:@SECLEVEL=0") -> ssl.SSLContext:
    """A client that will speak anything OpenSSL still knows (and verifies the CA)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(cadata=ca_pem.decode("ascii"))
    if version is not None:
        ctx.minimum_version = ctx.maximum_version = version
    else:
        ctx.minimum_version = ssl.TLSVersion.MINIMUM_SUPPORTED
    ctx.set_ciphers(ciphers)
    return ctx


def handshake(port: int, ctx: ssl.SSLContext) -> tuple[str, str]:
    """(protocol, cipher) of a completed handshake; raises ssl.SSLError when refused."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        with ctx.wrap_socket(raw, server_hostname="localhost") as tls:
            return tls.version(), tls.cipher()[0]


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[ServerThread]:
    with ServerThread(tmp_path_factory.mktemp("tls") / "certs", RecordingAdmitter()) as running:
        yield running


@pytest.fixture(scope="module")
def permissive_server(server) -> Iterator[int]:
    """A plain ``ssl`` server with infergate's certificate that accepts any version and suite."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.MINIMUM_SUPPORTED
    ctx.set_ciphers("ALL:@SECLEVEL=0")
    certs.load_serving(ctx, server.keeper.bundle)
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.1)  # so the loop notices ``stop``
    stop = threading.Event()

    def accept_loop() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            conn.settimeout(10)
            try:
                with ctx.wrap_socket(conn, server_side=True):
                    pass
            except (ssl.SSLError, OSError):
                pass

    thread = threading.Thread(target=accept_loop, daemon=True)
    thread.start()
    yield listener.getsockname()[1]
    stop.set()
    listener.close()
    thread.join(5)


@pytest.mark.parametrize("version", [ssl.TLSVersion.TLSv1, ssl.TLSVersion.TLSv1_1], ids=["TLSv1.0", "TLSv1.1"])
def test_tls_1_0_and_1_1_are_refused(server, permissive_server, version):
    ctx = permissive_client(server.ca_pem, version)
    assert handshake(permissive_server, ctx)[0] in ("TLSv1", "TLSv1.1")  # the client can speak it
    with pytest.raises(ssl.SSLError):
        handshake(server.port, ctx)


@pytest.mark.parametrize("version", [ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3], ids=["TLSv1.2", "TLSv1.3"])
def test_tls_1_2_and_1_3_are_accepted_by_a_default_client(server, version):
    ctx = certs.client_context(server.ca_pem)  # what a modern client (the apiserver) offers
    ctx.minimum_version = ctx.maximum_version = version
    protocol, cipher = handshake(server.port, ctx)
    assert protocol == {"TLSv1_2": "TLSv1.2", "TLSv1_3": "TLSv1.3"}[version.name]
    assert cipher in ALLOWED_TLS12 | ALLOWED_TLS13


def test_cipher_scan_tls12_only_ecdhe_aead(server, permissive_server):
    """Offer every TLS 1.2 suite OpenSSL knows, one at a time: the server takes only the
    forward-secret AEAD ones (no CBC, RC4, 3DES, NULL, export, anonymous, static RSA, PSK)."""
    # Suites a server with an ECDSA certificate could pick: ECDSA-authenticated and anonymous
    # ones (RSA, DSS and PSK suites need credentials it does not have).
    offered = [c["name"] for c in permissive_client(server.ca_pem).get_ciphers()
               if c["protocol"] == "TLSv1.2" and c["auth"] in ("auth-ecdsa", "auth-null")]
    assert len(offered) > 15
    accepted, usable_elsewhere = set(), set()
    for name in offered:
        ctx = permissive_client(server.ca_pem, ssl.TLSVersion.TLSv1_2, f"{name}:@SECLEVEL=0")
        try:
            handshake(permissive_server, ctx)
            usable_elsewhere.add(name)
        except ssl.SSLError:
            continue  # this OpenSSL build will not use it at all
        try:
            handshake(server.port, ctx)
            accepted.add(name)
        except ssl.SSLError:
            pass
    weak_but_possible = usable_elsewhere - ALLOWED_TLS12
    assert {"ECDHE-ECDSA-AES128-SHA256", "ECDHE-ECDSA-AES256-SHA384"} <= weak_but_possible  # CBC suites were tried
    assert accepted == ALLOWED_TLS12


def s_client(port: int, ca_file, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["openssl", "s_client", "-connect", f"127.0.0.1:{port}", "-servername", "localhost",
         "-CAfile", str(ca_file), "-verify_return_error", *args],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=20,
    )


def test_tls13_suites_seen_by_openssl_s_client(server):
    """Python cannot pin TLS 1.3 suites, openssl can: each of the three suites OpenSSL
    enables is accepted; the legacy protocols are refused to openssl too."""
    assert shutil.which("openssl"), "openssl is needed for the TLS 1.3 suite check"
    ca_file = server.cert_dir / "ca.crt"
    for suite in sorted(ALLOWED_TLS13):
        done = s_client(server.port, ca_file, "-tls1_3", "-ciphersuites", suite)
        assert done.returncode == 0 and f"Cipher is {suite}" in done.stdout, done.stdout + done.stderr
    for legacy in ("-tls1", "-tls1_1"):
        refused = s_client(server.port, ca_file, legacy, "-cipher", "ALL:@SECLEVEL=0")
        assert refused.returncode != 0, refused.stdout


def test_server_picks_the_strong_suite_when_a_weak_one_is_offered_first(server):
    ctx = permissive_client(server.ca_pem, ssl.TLSVersion.TLSv1_2,
                            "ECDHE-ECDSA-AES128-SHA:ECDHE-ECDSA-AES256-SHA:ECDHE-ECDSA-AES128-GCM-SHA256:@SECLEVEL=0")
    assert handshake(server.port, ctx) == ("TLSv1.2", "ECDHE-ECDSA-AES128-GCM-SHA256")


def test_no_tls_compression(server):
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as raw:
        with certs.client_context(server.ca_pem).wrap_socket(raw, server_hostname="localhost") as tls:
            assert tls.compression() is None


# ---------------------------------------------------------------------------------------
# Optional mTLS: the apiserver's client certificate, verified when a client CA is given.


def issue_client(ca: x509.Certificate, ca_key: ec.EllipticCurvePrivateKey, name: str) -> tuple[bytes, bytes]:
    key = ec.generate_private_key(ec.SECP256R1())
    now = certs.utcnow()
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    return cert.public_bytes(serialization.Encoding.PEM), key_pem


@pytest.fixture(scope="module")
def mtls(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("mtls")
    apiserver_ca, apiserver_ca_key = certs.issue_ca(now=certs.utcnow(), validity=dt.timedelta(days=1))
    stranger_ca, stranger_ca_key = certs.issue_ca(now=certs.utcnow(), validity=dt.timedelta(days=1))
    client_ca_pem = apiserver_ca.public_bytes(serialization.Encoding.PEM)
    identities = {}
    for who, (ca, key) in {"apiserver": (apiserver_ca, apiserver_ca_key), "stranger": (stranger_ca, stranger_ca_key)}.items():
        cert_pem, key_pem = issue_client(ca, key, f"{who}-client")
        (tmp / f"{who}.crt").write_bytes(cert_pem)
        (tmp / f"{who}.key").write_bytes(key_pem)
        identities[who] = (tmp / f"{who}.crt", tmp / f"{who}.key")
    with ServerThread(tmp / "certs", RecordingAdmitter(), client_ca=client_ca_pem) as running:
        yield running, identities


def mtls_request(running, identity: tuple | None, version: ssl.TLSVersion, path: str = "/validate") -> int:
    """HTTP status of a review (or a GET of a probe path) over a connection presenting
    ``identity`` (cert, key)."""
    ctx = certs.client_context(running.ca_pem)
    ctx.minimum_version = ctx.maximum_version = version
    if identity is not None:
        ctx.load_cert_chain(*identity)
    from .conftest import Client

    client = Client(running.port, ctx, timeout=10)
    try:
        if path in ("/validate", "/mutate"):
            return client.post(path, review({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}})).status
        return client.get(path).status
    finally:
        client.close()


REFUSED = (ssl.SSLError, ConnectionResetError, BrokenPipeError, __import__("http.client").client.RemoteDisconnected)


@pytest.mark.parametrize("version", [ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3], ids=["TLSv1.2", "TLSv1.3"])
def test_mtls_requires_a_client_certificate_from_the_configured_ca(mtls, version):
    running, identities = mtls
    judged = len(running.slot.admitter.seen)
    assert mtls_request(running, identities["apiserver"], version) == 200
    # no certificate (the kubelet's probes): the probes answer, reviews are refused
    assert mtls_request(running, None, version, "/healthz") == 200
    assert mtls_request(running, None, version, "/readyz") == 200
    assert mtls_request(running, None, version, "/validate") == 401
    assert mtls_request(running, None, version, "/mutate") == 401
    # a certificate from another CA: the handshake fails (TLS 1.3 reports it on the first read)
    for path in ("/healthz", "/validate"):
        with pytest.raises(REFUSED):
            mtls_request(running, identities["stranger"], version, path)
    assert mtls_request(running, identities["apiserver"], version) == 200  # and it still serves
    assert len(running.slot.admitter.seen) == judged + 2  # only the apiserver's reviews were judged
