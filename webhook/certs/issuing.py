"""Issuing certificates: a CA (self-signed, P-256) and a serving certificate it signs, and the
names the serving certificate carries."""

from __future__ import annotations

import datetime as dt
import ipaddress
from collections.abc import Iterable, Sequence

from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes as PrivateKey
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from webhook.certs.bundle import CertError, not_after


def serving_sans(service: str | None = None, extra: Iterable[str] = ()) -> tuple[str, ...]:
    """SANs of the serving certificate: localhost, 127.0.0.1, a Service's DNS names, extras.

    ``service`` is ``NAMESPACE/NAME``: the apiserver dials ``NAME.NAMESPACE.svc``.
    """
    names = ["localhost", "127.0.0.1"]
    if service:
        namespace, name = parse_namespaced(service)
        names += [name, f"{name}.{namespace}", f"{name}.{namespace}.svc", f"{name}.{namespace}.svc.cluster.local"]
    names += [n for n in extra if n]
    return tuple(dict.fromkeys(names))


def parse_namespaced(text: str) -> tuple[str, str]:
    """``NAMESPACE/NAME`` (a Service, a Secret) as its two parts."""
    namespace, sep, name = text.partition("/")
    if not sep or not namespace or not name or "/" in name:
        raise ValueError(f"expected NAMESPACE/NAME, got {text!r}")
    return namespace, name


def issue_ca(
    *, now: dt.datetime, validity: dt.timedelta, backdate: dt.timedelta = dt.timedelta(minutes=5)
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "infergate"),
            x509.NameAttribute(NameOID.COMMON_NAME, f"infergate-ca@{int(now.timestamp())}"),
        ]
    )
    ski = x509.SubjectKeyIdentifier.from_public_key(key.public_key())
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - backdate)
        .not_valid_after(now + validity)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
                key_encipherment=False, data_encipherment=False, key_agreement=False,
                encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(ski, critical=False)
        .sign(key, hashes.SHA256())
    )
    return cert, key


def issue_serving(
    ca: x509.Certificate, ca_key: PrivateKey, *, sans: Sequence[str], now: dt.datetime,
    validity: dt.timedelta, backdate: dt.timedelta = dt.timedelta(minutes=5), key: PrivateKey | None = None,
) -> tuple[x509.Certificate, PrivateKey]:
    """A serving certificate for ``sans`` signed by ``ca`` (a new P-256 key unless ``key``)."""
    if not sans:
        raise CertError("a serving certificate needs at least one name")
    key = key or ec.generate_private_key(ec.SECP256R1())
    expires = min(now + validity, not_after(ca))
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, sans[0])]))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - backdate)
        .not_valid_after(expires)
        .add_extension(x509.SubjectAlternativeName([_general_name(n) for n in sans]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    return cert, key


def _general_name(name: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(name))
    except ValueError:
        return x509.DNSName(name)
