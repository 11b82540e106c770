"""TLS contexts: the server's (serving a bundle, asking for the apiserver's client
certificate), a live swap of its certificate, and a client's that trusts a caBundle."""

from __future__ import annotations

import os
import ssl
import tempfile
from pathlib import Path

from webhook.certs.bundle import CERT_FILE, KEY_FILE, CertBundle

# Modern AEAD suites for TLS 1.2 (TLS 1.3 suites are fixed by OpenSSL and all modern).
TLS12_CIPHERS = "ECDHE+AESGCM:ECDHE+CHACHA20"


def server_context(bundle: CertBundle, *, client_ca: bytes | None = None) -> ssl.SSLContext:
    """A TLS 1.2+ server context serving ``bundle``'s certificate.

    With ``client_ca`` (PEM), a client certificate is asked for and, when presented, must
    be signed by it (the apiserver's: mTLS) or the handshake fails. It is optional at the
    TLS level so that the kubelet's HTTPS probes (which present none) reach /healthz and
    /readyz; the server refuses reviews on connections without one.
    """
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.set_ciphers(TLS12_CIPHERS)
    ctx.options |= ssl.OP_NO_COMPRESSION | ssl.OP_CIPHER_SERVER_PREFERENCE | ssl.OP_NO_RENEGOTIATION
    load_serving(ctx, bundle)
    if client_ca:
        ctx.verify_mode = ssl.CERT_OPTIONAL
        ctx.load_verify_locations(cadata=client_ca.decode("ascii"))
    return ctx


def load_serving(ctx: ssl.SSLContext, bundle: CertBundle) -> None:
    """Swap the serving certificate of a live context: new handshakes get it at once.

    ``load_cert_chain`` reads files only, so the pair goes through a private temporary
    directory. The pair was checked to match when the bundle was built, so the context
    is never left with a certificate and a foreign key.
    """
    files = bundle.to_files()
    with tempfile.TemporaryDirectory(prefix="infergate-tls-") as tmp:
        cert_path, key_path = Path(tmp, CERT_FILE), Path(tmp, KEY_FILE)
        cert_path.write_bytes(files[CERT_FILE])
        fd = os.open(key_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(files[KEY_FILE])
        ctx.load_cert_chain(cert_path, key_path)


def client_context(ca_pem: bytes) -> ssl.SSLContext:
    """A client context trusting exactly ``ca_pem`` (what the apiserver does with caBundle)."""
    ctx = ssl.create_default_context(cadata=ca_pem.decode("ascii"))
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    return ctx
