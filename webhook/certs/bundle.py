"""A CertBundle: the trust bundle, the signer's key and the serving pair, with the facts
every other part reads off a certificate (its names, its expiry, who signed it)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes as PrivateKey

CA_FILE = "ca.crt"  # the trust bundle: every CA the clients should accept, oldest first
CA_KEY_FILE = "ca.key"  # the key of the newest CA in the bundle (the next signer)
CERT_FILE = "tls.crt"
KEY_FILE = "tls.key"
FILES = (CA_FILE, CA_KEY_FILE, CERT_FILE, KEY_FILE)


class CertError(Exception):
    """Certificates that cannot be read, do not match, or cannot be stored."""


class CertConflict(CertError):
    """Someone else (another replica) wrote the stored certificates first: read them again."""


@dataclass(frozen=True)
class CertBundle:
    """Everything the webhook needs: the trust bundle, the signer's key, the serving pair.

    Certificates managed elsewhere (cert-manager, a mounted Secret) come without the CA's
    key (``ca_key`` None), possibly without ``ca.crt``, with any key type and with
    intermediates after the leaf in ``tls.crt`` (kept in ``chain`` and served)."""

    trusted: tuple[x509.Certificate, ...]  # oldest first; the last one owns ``ca_key``
    ca_key: ec.EllipticCurvePrivateKey | None
    cert: x509.Certificate
    key: PrivateKey
    chain: tuple[x509.Certificate, ...] = ()

    @property
    def signer(self) -> x509.Certificate:
        return self.trusted[-1]

    @property
    def issuer_of_cert(self) -> x509.Certificate | None:
        return next((ca for ca in reversed(self.trusted) if signed_by(self.cert, ca)), None)

    def ca_pem(self) -> bytes:
        return b"".join(ca.public_bytes(serialization.Encoding.PEM) for ca in self.trusted)

    def to_files(self) -> dict[str, bytes]:
        files = {
            CERT_FILE: b"".join(c.public_bytes(serialization.Encoding.PEM) for c in (self.cert, *self.chain)),
            KEY_FILE: key_pem(self.key),
        }
        if self.trusted:
            files[CA_FILE] = self.ca_pem()
        if self.ca_key is not None:
            files[CA_KEY_FILE] = key_pem(self.ca_key)
        return files

    @classmethod
    def from_files(cls, files: dict[str, bytes], *, signing: bool = True) -> CertBundle:
        """``signing``: the CA and its key must be there (the webhook issues certificates)."""
        required = FILES if signing else (CERT_FILE, KEY_FILE)
        missing = [name for name in required if not files.get(name)]
        if missing:
            raise CertError(f"missing {', '.join(missing)}")
        try:
            trusted = tuple(x509.load_pem_x509_certificates(files[CA_FILE])) if files.get(CA_FILE) else ()
            ca_key = serialization.load_pem_private_key(files[CA_KEY_FILE], password=None) if signing else None
            cert, *chain = x509.load_pem_x509_certificates(files[CERT_FILE])
            key = serialization.load_pem_private_key(files[KEY_FILE], password=None)
        except ValueError as exc:
            raise CertError(f"unreadable certificate or key: {exc}") from None
        if signing and not (isinstance(ca_key, ec.EllipticCurvePrivateKey) and isinstance(key, ec.EllipticCurvePrivateKey)):
            raise CertError("keys must be ECDSA keys")
        bundle = cls(trusted, ca_key, cert, key, tuple(chain))
        if signing and not same_key(bundle.signer, ca_key):
            raise CertError(f"{CA_KEY_FILE} does not belong to the newest CA in {CA_FILE}")
        if not same_key(cert, key):
            raise CertError(f"{KEY_FILE} does not belong to {CERT_FILE}")
        return bundle


def subject_alt_names(cert: x509.Certificate) -> list[str]:
    """The DNS names and IP addresses a certificate is valid for."""
    try:
        ext = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return []
    return [str(n.value) for n in ext]


def not_after(cert: x509.Certificate) -> dt.datetime:
    return cert.not_valid_after_utc


def signed_by(cert: x509.Certificate, ca: x509.Certificate) -> bool:
    """Whether ``ca`` issued ``cert`` (names and signature)."""
    if cert.issuer != ca.subject:
        return False
    try:
        cert.verify_directly_issued_by(ca)
    except (InvalidSignature, ValueError, TypeError):
        return False
    return True


def same_key(cert: x509.Certificate, key: PrivateKey) -> bool:
    return cert.public_key() == key.public_key()


def key_pem(key: PrivateKey) -> bytes:
    """A private key as unencrypted PKCS#8 PEM (the ``tls.key`` and ``ca.key`` files)."""
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())


def expiry(bundle: CertBundle) -> dict[str, dt.datetime]:
    """When each part expires (for metrics and logs)."""
    when = {"serving": not_after(bundle.cert)}
    if bundle.trusted:
        when["ca"] = min(not_after(ca) for ca in bundle.trusted)
    return when


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)
