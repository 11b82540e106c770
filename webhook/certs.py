"""The webhook's certificates: a CA, a serving certificate, and a rotation without an outage.

The apiserver trusts the webhook through ``caBundle``; the webhook proves itself with a
serving certificate signed by a CA in that bundle. cert-controller rotates both at once
and replaces the bundle, which leaves a window where the apiserver trusts only the new CA
while the pod still serves the old certificate (or the reverse) until the mounted Secret
catches up. Here rotation is staged instead, by :func:`plan`:

1. the CA nears expiry: a new CA is *appended* to the bundle; the serving certificate
   stays signed by the old one, which the bundle still trusts;
2. ``overlap`` later (every apiserver and replica has seen the new bundle): the serving
   certificate is reissued by the new CA;
3. ``overlap`` after that (every replica serves the new certificate): the old CA leaves
   the bundle. Expired CAs are always dropped.

A serving certificate renewed by the same CA needs no staging: the bundle trusts both.

:func:`plan` is pure (state and clock in, state out). The edges are a directory store
(``certs/`` locally, or a mounted Secret, whose kubelet symlink swap is detected by
:class:`FileWatcher`), a Secret store for clusters, and :func:`inject_ca_bundle`, which
writes the bundle into the project's webhook configurations.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import dataclasses
import datetime as dt
import ipaddress
import os
import ssl
import tempfile
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes as PrivateKey
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA_FILE = "ca.crt"  # the trust bundle: every CA the clients should accept, oldest first
CA_KEY_FILE = "ca.key"  # the key of the newest CA in the bundle (the next signer)
CERT_FILE = "tls.crt"
KEY_FILE = "tls.key"
FILES = (CA_FILE, CA_KEY_FILE, CERT_FILE, KEY_FILE)

# Modern AEAD suites for TLS 1.2 (TLS 1.3 suites are fixed by OpenSSL and all modern).
TLS12_CIPHERS = "ECDHE+AESGCM:ECDHE+CHACHA20"


class CertError(Exception):
    """Certificates that cannot be read, do not match, or cannot be stored."""


class CertConflict(CertError):
    """Someone else (another replica) wrote the stored certificates first: read them again."""


@dataclass(frozen=True)
class RotationPolicy:
    ca_validity: dt.timedelta = dt.timedelta(days=365 * 5)
    serving_validity: dt.timedelta = dt.timedelta(days=90)
    # Renew when less than this fraction of a certificate's lifetime is left.
    renew_fraction: float = 1 / 3
    # How long a bundle change needs to reach every apiserver and replica.
    overlap: dt.timedelta = dt.timedelta(minutes=10)
    # Certificates start this much in the past so a client with a slow clock accepts them.
    backdate: dt.timedelta = dt.timedelta(minutes=5)


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
        return next((ca for ca in reversed(self.trusted) if _signed_by(self.cert, ca)), None)

    def ca_pem(self) -> bytes:
        return b"".join(ca.public_bytes(serialization.Encoding.PEM) for ca in self.trusted)

    def to_files(self) -> dict[str, bytes]:
        files = {
            CERT_FILE: b"".join(c.public_bytes(serialization.Encoding.PEM) for c in (self.cert, *self.chain)),
            KEY_FILE: _key_pem(self.key),
        }
        if self.trusted:
            files[CA_FILE] = self.ca_pem()
        if self.ca_key is not None:
            files[CA_KEY_FILE] = _key_pem(self.ca_key)
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
        if signing and not _same_key(bundle.signer, ca_key):
            raise CertError(f"{CA_KEY_FILE} does not belong to the newest CA in {CA_FILE}")
        if not _same_key(cert, key):
            raise CertError(f"{KEY_FILE} does not belong to {CERT_FILE}")
        return bundle


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


# ---------------------------------------------------------------------------------------
# The pure core: what to do given the current state and the clock.


@dataclass(frozen=True)
class Plan:
    bundle: CertBundle
    actions: tuple[str, ...] = ()  # human-readable, for the logs; empty: nothing changed

    @property
    def changed(self) -> bool:
        return bool(self.actions)


def plan(current: CertBundle | None, *, now: dt.datetime, sans: Sequence[str], policy: RotationPolicy) -> Plan:
    """The next state of the certificates (see the module docstring for the stages)."""
    if current is None:
        ca, ca_key = issue_ca(now=now, validity=policy.ca_validity, backdate=policy.backdate)
        cert, key = issue_serving(
            ca, ca_key, sans=sans, now=now, validity=policy.serving_validity, backdate=policy.backdate
        )
        return Plan(CertBundle((ca,), ca_key, cert, key), ("created CA and serving certificate",))

    actions: list[str] = []
    bundle = current

    # Expired CAs verify nothing; the signer is kept (the next step replaces it).
    live = tuple(ca for ca in bundle.trusted[:-1] if _not_after(ca) > now) + (bundle.signer,)
    if live != bundle.trusted:
        bundle = dataclasses.replace(bundle, trusted=live)
        actions.append("dropped expired CA from the bundle")

    # Stage 1: a new CA joins the bundle well before the signer expires.
    if _due(bundle.signer, now, policy.renew_fraction):
        ca, ca_key = issue_ca(now=now, validity=policy.ca_validity, backdate=policy.backdate)
        bundle = dataclasses.replace(bundle, trusted=bundle.trusted + (ca,), ca_key=ca_key)
        actions.append("appended a new CA to the bundle")

    # Stage 2: the serving certificate is reissued by the newest CA: when broken, or,
    # once the newest CA has reached every client, to move to it, when due or renamed.
    issuer = bundle.issuer_of_cert
    signer_spread = issuer == bundle.signer or _trusted_since(bundle.signer, policy) + policy.overlap <= now
    if issuer is None:
        reason = "serving certificate not signed by a trusted CA"
    elif _not_after(bundle.cert) <= now:
        reason = "serving certificate expired"
    elif not signer_spread:
        reason = None  # serving a cert from the new CA now would fail on lagging clients
    elif issuer != bundle.signer:
        reason = "serving certificate moved to the new CA"
    elif _due(bundle.cert, now, policy.renew_fraction):
        reason = "serving certificate due for renewal"
    elif set(_sans(bundle.cert)) != set(sans):
        reason = "serving certificate names changed"
    else:
        reason = None
    if reason:
        cert, key = issue_serving(
            bundle.signer, bundle.ca_key, sans=sans, now=now, validity=policy.serving_validity, backdate=policy.backdate
        )
        bundle = dataclasses.replace(bundle, cert=cert, key=key)
        actions.append(reason)

    # Stage 3: an older CA leaves once the serving certificate from the new one has spread.
    cert_spread = _trusted_since(bundle.cert, policy) + policy.overlap <= now
    if len(bundle.trusted) > 1 and bundle.issuer_of_cert == bundle.signer and cert_spread:
        bundle = dataclasses.replace(bundle, trusted=(bundle.signer,))
        actions.append("removed the previous CA from the bundle")

    return Plan(bundle, tuple(actions))


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
    not_after = min(now + validity, _not_after(ca))
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, sans[0])]))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - backdate)
        .not_valid_after(not_after)
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


def _sans(cert: x509.Certificate) -> list[str]:
    try:
        ext = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return []
    return [str(n.value) for n in ext]


def _not_after(cert: x509.Certificate) -> dt.datetime:
    return cert.not_valid_after_utc


def _trusted_since(cert: x509.Certificate, policy: RotationPolicy) -> dt.datetime:
    """The latest moment it can have been issued: X.509 times drop the fraction of a
    second, so the true moment may be up to a second after the recorded one."""
    return cert.not_valid_before_utc + policy.backdate + dt.timedelta(seconds=1)


def _due(cert: x509.Certificate, now: dt.datetime, fraction: float) -> bool:
    lifetime = cert.not_valid_after_utc - cert.not_valid_before_utc
    return cert.not_valid_after_utc - now < lifetime * fraction


def _signed_by(cert: x509.Certificate, ca: x509.Certificate) -> bool:
    if cert.issuer != ca.subject:
        return False
    try:
        cert.verify_directly_issued_by(ca)
    except (InvalidSignature, ValueError, TypeError):
        return False
    return True


def _same_key(cert: x509.Certificate, key: PrivateKey) -> bool:
    return cert.public_key() == key.public_key()


def _key_pem(key: PrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())


def expiry(bundle: CertBundle) -> dict[str, dt.datetime]:
    """When each part expires (for metrics and logs)."""
    when = {"serving": _not_after(bundle.cert)}
    if bundle.trusted:
        when["ca"] = min(_not_after(ca) for ca in bundle.trusted)
    return when


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


# ---------------------------------------------------------------------------------------
# TLS contexts.


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


# ---------------------------------------------------------------------------------------
# Stores: where the files live.


@dataclass
class DirectoryStore:
    """``ca.crt``, ``ca.key``, ``tls.crt``, ``tls.key`` in a directory (``certs/`` or a mount).

    ``signing=False``: files managed elsewhere (a cert-manager Secret has no ``ca.key``)."""

    path: Path
    signing: bool = True

    def read_files(self) -> dict[str, bytes]:
        files = {}
        for name in FILES:
            try:
                files[name] = (self.path / name).read_bytes()
            except FileNotFoundError:
                pass
            except OSError as exc:
                raise CertError(f"cannot read {self.path / name}: {exc.strerror}") from None
        return files

    def load(self) -> CertBundle | None:
        files = self.read_files()
        return CertBundle.from_files(files, signing=self.signing) if files else None

    def save(self, bundle: CertBundle) -> None:
        """Write every file atomically (keys first, owner-only)."""
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            files = bundle.to_files()
            for name in (n for n in (CA_KEY_FILE, KEY_FILE, CA_FILE, CERT_FILE) if n in files):
                _atomic_write(self.path / name, files[name], private=name.endswith(".key"))
        except OSError as exc:
            raise CertError(f"cannot write certificates to {self.path}: {exc.strerror}") from None


def _atomic_write(path: Path, data: bytes, *, private: bool) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        os.fchmod(fd, 0o600 if private else 0o644)
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class FileWatcher:
    """Notices when files change, including the kubelet's ``..data`` symlink swap.

    A mounted Secret is ``tls.crt -> ..data/tls.crt`` with ``..data -> ..2024_..._xyz``;
    an update writes a new timestamped directory and renames a new ``..data`` over the old
    one, so the file's *path* never changes. The fingerprint therefore follows every
    symlink and records the resolved target with its inode, size and mtime.
    """

    def __init__(self, paths: Iterable[Path]):
        self.paths = tuple(paths)
        self._last = self.fingerprint()

    def fingerprint(self) -> tuple[Any, ...]:
        marks = []
        for path in self.paths:
            try:
                st = path.stat()
                marks.append((os.path.realpath(path), st.st_ino, st.st_size, st.st_mtime_ns))
            except OSError:
                marks.append((str(path), None))
        return tuple(marks)

    def changed(self) -> bool:
        current = self.fingerprint()
        if current == self._last:
            return False
        self._last = current
        return True


class SecretStore:
    """The certificates kept in a Secret (``type: kubernetes.io/tls`` plus the CA files).

    Uses the ``kubernetes`` client synchronously (run it in a thread); reads go through the
    raw JSON so nothing depends on the generated models. ``save`` is optimistic: it carries
    the ``resourceVersion`` it read, so two replicas rotating at once cannot both win.
    """

    def __init__(self, api_client: Any, namespace: str, name: str):
        from kubernetes.client import CoreV1Api

        self.core = CoreV1Api(api_client)
        self.namespace, self.name = namespace, name
        self._resource_version: str | None = None

    def load(self) -> CertBundle | None:
        from kubernetes.client.exceptions import ApiException

        try:
            resp = self.core.read_namespaced_secret(self.name, self.namespace, _preload_content=False)
        except ApiException as exc:
            if exc.status == 404:
                self._resource_version = None
                return None
            raise CertError(f"cannot read Secret {self.namespace}/{self.name}: {exc.status} {exc.reason}") from None
        secret = _json(resp)
        self._resource_version = secret.get("metadata", {}).get("resourceVersion")
        data = {k: base64.b64decode(v) for k, v in (secret.get("data") or {}).items() if k in FILES}
        return CertBundle.from_files(data) if data else None

    def save(self, bundle: CertBundle) -> None:
        from kubernetes.client.exceptions import ApiException

        body = {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": self.name, "namespace": self.namespace},
            "type": "kubernetes.io/tls",
            "data": {k: base64.b64encode(v).decode("ascii") for k, v in bundle.to_files().items()},
        }
        try:
            if self._resource_version is None:
                resp = self.core.create_namespaced_secret(self.namespace, body, _preload_content=False)
            else:
                body["metadata"]["resourceVersion"] = self._resource_version
                resp = self.core.replace_namespaced_secret(self.name, self.namespace, body, _preload_content=False)
        except ApiException as exc:
            if exc.status == 409:
                raise CertConflict(f"Secret {self.namespace}/{self.name} was written by someone else meanwhile") from None
            raise CertError(f"cannot write Secret {self.namespace}/{self.name}: {exc.status} {exc.reason}") from None
        self._resource_version = _json(resp).get("metadata", {}).get("resourceVersion")


# The project's two webhook configurations, as the ``kubernetes`` client names their calls.
WEBHOOK_CONFIGURATIONS = {
    "MutatingWebhookConfiguration": "mutating_webhook_configuration",
    "ValidatingWebhookConfiguration": "validating_webhook_configuration",
}


def ca_bundle_patch(configuration: dict[str, Any], ca_pem: bytes) -> list[dict[str, Any]]:
    """The JSON patch that puts ``ca_pem`` into every webhook of ``configuration`` lacking
    it, guarded by a ``test`` of the resourceVersion read (a concurrent edit makes it fail
    instead of being overwritten); ``[]`` when every webhook already carries it."""
    encoded = base64.b64encode(ca_pem).decode("ascii")
    ops: list[dict[str, Any]] = [
        {"op": "add", "path": f"/webhooks/{i}/clientConfig/caBundle", "value": encoded}
        for i, hook in enumerate(configuration.get("webhooks") or [])
        if (hook.get("clientConfig") or {}).get("caBundle") != encoded
    ]
    if not ops:
        return []
    return [{"op": "test", "path": "/metadata/resourceVersion", "value": configuration["metadata"]["resourceVersion"]}, *ops]


def inject_ca_bundle(api_client: Any, config_name: str, ca_pem: bytes, *, read: dict[str, dict] | None = None,
                     attempts: int = 5) -> list[str]:
    """Write ``ca_pem`` into every webhook of the project's two webhook configurations.

    Idempotent, so it runs at every certificate check (a configuration recreated by a
    ``helm upgrade`` or a GitOps re-apply, or created after the pod started, gets the
    bundle back): two reads, and a write only where a webhook lacks the bundle. ``read``:
    configurations already at hand (a watch event), by kind. Returns the kinds changed.

    The write is guarded by the resourceVersion read: when someone changed the configuration
    in between (another replica injecting the same bundle as both start), the apiserver
    refuses it (422: the test op failed; 409) and it is read again and retried, up to
    ``attempts`` times, instead of failing the replica's start.
    """
    from kubernetes.client import AdmissionregistrationV1Api
    from kubernetes.client.exceptions import ApiException

    api = AdmissionregistrationV1Api(api_client)
    changed = []
    for kind, call in WEBHOOK_CONFIGURATIONS.items():
        if read is not None and kind not in read:
            continue
        at_hand = read[kind] if read is not None else None
        for attempt in range(1, attempts + 1):
            try:
                obj = at_hand if at_hand is not None else _json(
                    getattr(api, "read_" + call)(config_name, _preload_content=False))
            except ApiException as exc:
                if exc.status == 404:
                    break  # not installed (yet): the next check or the watch sees it arrive
                raise CertError(f"cannot read {kind} {config_name}: {exc.status} {exc.reason}") from None
            at_hand = None  # a retry reads the configuration as it is now
            ops = ca_bundle_patch(obj, ca_pem)
            if not ops:
                break
            try:
                getattr(api, "patch_" + call)(config_name, ops, _preload_content=False)
            except ApiException as exc:
                if exc.status in (409, 422) and attempt < attempts:
                    continue  # changed since it was read
                if exc.status == 404:
                    break  # deleted meanwhile
                raise CertError(f"cannot update caBundle of {kind} {config_name}: {exc.status} {exc.reason}") from None
            changed.append(kind)
            break
    return changed


class WebhookConfigurationWatch:
    """Puts the bundle back within moments when a configuration appears or changes
    without it, instead of at the next certificate check: a watch per configuration kind,
    by name (``fieldSelector metadata.name``, so RBAC can limit it to that name), in a
    daemon thread each (the ``kubernetes`` client blocks; a daemon never holds up exit).

    Every (re)started watch begins with the configuration as it is (an ADDED event), so a
    watch that broke and came back also catches up. ``current_ca`` returns the bundle
    being published (None before the first load).
    """

    def __init__(self, api_client: Any, config_name: str, current_ca: Any, *, logger: Any,
                 timeout_seconds: int = 300, retry_seconds: float = 1.0, max_retry_seconds: float = 300.0):
        self.api_client, self.config_name, self.current_ca, self.logger = api_client, config_name, current_ca, logger
        self.timeout_seconds, self.retry_seconds, self.max_retry_seconds = timeout_seconds, retry_seconds, max_retry_seconds
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        for kind in WEBHOOK_CONFIGURATIONS:
            thread = threading.Thread(target=self._watch, args=(kind,), name=f"watch-{kind}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self) -> None:
        self._stop.set()  # each thread ends at its next event or watch timeout

    def _watch(self, kind: str) -> None:
        from kubernetes import watch
        from kubernetes.client import AdmissionregistrationV1Api

        list_ = getattr(AdmissionregistrationV1Api(self.api_client), f"list_{WEBHOOK_CONFIGURATIONS[kind]}")
        delay = self.retry_seconds
        while not self._stop.is_set():
            began = time.monotonic()
            try:
                stream = watch.Watch().stream(
                    list_, field_selector=f"metadata.name={self.config_name}", timeout_seconds=self.timeout_seconds,
                    _request_timeout=self.timeout_seconds + 30)
                for event in stream:
                    if self._stop.is_set():
                        return
                    delay = self.retry_seconds  # the watch works
                    self._seen(kind, event)
                if time.monotonic() - began >= 1:
                    continue  # the watch's timeout: watch again
                problem = "the watch ended at once"  # a proxy cutting streams: do not spin
            except Exception as exc:  # unreachable API, 403 (RBAC), a 409 from a concurrent edit
                problem = f"{type(exc).__name__}: {exc}"
            self.logger.warning("watching the webhook configuration failed; retrying",
                                extra={"fields": {"kind": kind, "error": problem, "retry_seconds": delay}})
            self._stop.wait(delay)
            delay = min(delay * 2, self.max_retry_seconds)

    def _seen(self, kind: str, event: dict[str, Any]) -> None:
        ca_pem, obj = self.current_ca(), event.get("raw_object")
        if event.get("type") not in ("ADDED", "MODIFIED") or ca_pem is None or not isinstance(obj, dict):
            return
        if inject_ca_bundle(self.api_client, self.config_name, ca_pem, read={kind: obj}):
            self.logger.info("caBundle injected", extra={"fields": {"configurations": [kind], "trigger": "watch"}})


def _json(response: Any) -> dict[str, Any]:
    import orjson

    return orjson.loads(response.data)


# ---------------------------------------------------------------------------------------
# The runtime: keep the live TLS context serving the current certificate.


class CertKeeper:
    """Loads, rotates and hot-reloads the serving certificate of one live TLS context.

    ``manage=True`` (modes "self" and "secret"): :func:`plan` runs every check and its
    result is saved to the store, and ``on_bundle`` (idempotent) publishes the bundle
    at every check.
    ``manage=False`` (mode "files"): someone else (cert-manager, a mounted Secret) owns
    the files; they are only watched and reloaded.
    Blocking store calls run in a thread; TLS reloads happen on the event loop, between
    handshakes, so no connection ever sees half a change.
    """

    def __init__(
        self, store: Any, *, sans: Sequence[str], policy: RotationPolicy, manage: bool,
        client_ca: bytes | None = None, watch: FileWatcher | None = None,
        on_bundle: Any = None, on_change: Any = None, clock: Any = utcnow,
    ):
        self.store, self.sans, self.policy, self.manage = store, tuple(sans), policy, manage
        self.client_ca, self.watch, self.on_bundle, self.on_change, self.clock = client_ca, watch, on_bundle, on_change, clock
        self.bundle: CertBundle | None = None
        self.context: ssl.SSLContext | None = None
        self.error: str | None = None
        self._served: x509.Certificate | None = None

    def refresh(self) -> tuple[str, ...]:
        """Blocking: read the store, plan (when managing), save; returns the actions taken.

        Does not touch the TLS context (see :meth:`apply`)."""
        current = self.store.load()
        if not self.manage:
            if current is None:
                raise CertError("no certificates to serve (expected ca.crt, ca.key, tls.crt, tls.key)")
            self.bundle = current
            return ()
        restored = ()
        if current is None and self.bundle is not None:
            # The store lost what is being served (a wiped directory, a deleted Secret): put
            # it back rather than start over with a new CA that no client trusts yet.
            self.store.save(self.bundle)
            current, restored = self.bundle, ("restored the certificates being served to the store",)
        result = plan(current, now=self.clock(), sans=self.sans, policy=self.policy)
        if result.changed:
            self.store.save(result.bundle)
        if self.on_bundle is not None:
            # At every check, not only on change: where the bundle is published (the webhook
            # configurations) can lose it without us (recreated, or created after we started).
            self.on_bundle(result.bundle)
        self.bundle = result.bundle
        return restored + result.actions

    def apply(self) -> bool:
        """Serve ``self.bundle`` from now on; True when the certificate changed."""
        bundle = self.bundle
        if bundle is None:
            return False
        reloaded = self.context is not None
        if self.context is None:
            self.context = server_context(bundle, client_ca=self.client_ca)
        elif self._served != bundle.cert:
            load_serving(self.context, bundle)
        else:
            return False
        self._served = bundle.cert
        if self.on_change is not None:
            self.on_change(bundle, reloaded)
        return True

    def start(self, attempts: int = 5) -> ssl.SSLContext:
        """The first load, before the server listens (blocking, milliseconds). Replicas
        starting together race to create the Secret: the losers read the winner's."""
        for attempt in range(1, attempts + 1):
            try:
                self.refresh()
                break
            except CertConflict:
                if attempt == attempts:
                    raise
        self.apply()
        if self.watch is not None:
            self.watch.changed()  # the files as served (maybe just written) are the baseline
        assert self.context is not None
        return self.context

    def problem(self) -> str | None:
        """For /readyz: None while a valid certificate is served."""
        if self.bundle is None:
            return self.error or "not loaded"
        if _not_after(self.bundle.cert) <= self.clock():
            return "serving certificate expired"
        return None

    async def run(self, *, check_interval: float, watch_interval: float, logger: Any) -> None:
        """Forever: rotate every ``check_interval``, reload when the files change.

        A failure (store unreachable, files caught mid-update) is logged and retried at
        the next look; the certificate being served stays until a good one replaces it."""
        next_check = time.monotonic() + check_interval
        retry = False
        while True:
            await asyncio.sleep(min(watch_interval, max(next_check - time.monotonic(), 0)))
            due = time.monotonic() >= next_check
            if not (due or retry or (self.watch is not None and self.watch.changed())):
                continue
            if due:
                next_check = time.monotonic() + check_interval
            try:
                actions = await asyncio.to_thread(self.refresh)
                if self.watch is not None:
                    self.watch.changed()  # our own writes are not news
                reloaded = self.apply()
            except Exception as exc:  # CertError, the API client's errors, OSError, ssl.SSLError
                retry, self.error = True, f"{type(exc).__name__}: {exc}"
                logger.error("certificate refresh failed; serving the previous certificate",
                             extra={"fields": {"error": self.error}})
                continue
            retry, self.error = False, None
            for action in actions:
                logger.info("certificates: " + action)
            if reloaded:
                logger.info("serving certificate reloaded",
                            extra={"fields": {"expires": _not_after(self.bundle.cert).isoformat()}})


# ---------------------------------------------------------------------------------------
# `infergate certs`


CERTS_EXAMPLES = """\
infergate certs generate --dir certs --service ns/name     # create, or renew when due (the CA first)
infergate certs generate --dir certs --san webhook.example --force
infergate certs show --dir certs                           # what they are and when they expire
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from webhook import console

    parser.epilog = console.epilog(CERTS_EXAMPLES, exit_codes="""\
exit status:
  0  done
  2  usage error, or certificates that cannot be read or written (said in one line)""")
    sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION", parser_class=console.Parser)
    gen = sub.add_parser("generate", help="create or renew the CA and serving certificate in a directory")
    gen.add_argument("--dir", type=Path, default=Path("certs"), help="where to write ca.crt, ca.key, tls.crt, tls.key (default: certs)")
    gen.add_argument("--service", help="NAMESPACE/NAME of the webhook's Service: its DNS names go into the SANs")
    gen.add_argument("--san", action="append", default=[], help="an extra DNS name or IP address (repeatable)")
    gen.add_argument("--force", action="store_true", help="start over with a new CA even when valid certificates exist")
    show = sub.add_parser("show", help="print what the certificates in a directory are and when they expire")
    show.add_argument("--dir", type=Path, default=Path("certs"), help="where the certificates are (default: certs)")


def run(args: argparse.Namespace) -> int:
    from webhook import console

    store = DirectoryStore(args.dir)
    try:
        current = store.load()
        if args.action == "show":
            if current is None:
                return console.error(f"certs: no certificates in {args.dir}")
            print(describe(current))
            return 0
        sans = serving_sans(args.service, args.san)
        result = plan(None if args.force else current, now=utcnow(), sans=sans, policy=RotationPolicy())
        if result.changed:
            store.save(result.bundle)
        for action in result.actions or ("certificates are valid; nothing to do",):
            print(action)
        print(describe(result.bundle))
        print(f"caBundle (base64): {base64.b64encode(result.bundle.ca_pem()).decode('ascii')}")
        return 0
    except (CertError, ValueError) as exc:
        return console.error(f"certs: {exc}")


def describe(bundle: CertBundle) -> str:
    lines = [f"serving certificate: {', '.join(_sans(bundle.cert))} (expires {_not_after(bundle.cert):%Y-%m-%d %H:%M} UTC)"]
    for ca in bundle.trusted:
        role = "signer" if ca == bundle.signer else "previous"
        lines.append(f"CA ({role}): {ca.subject.rfc4514_string()} (expires {_not_after(ca):%Y-%m-%d %H:%M} UTC)")
    return "\n".join(lines)


__all__ = [
    "CertBundle", "CertConflict", "CertError", "CertKeeper", "DirectoryStore", "FileWatcher", "Plan", "RotationPolicy", "SecretStore",
    "WebhookConfigurationWatch", "ca_bundle_patch", "client_context", "expiry", "inject_ca_bundle", "issue_ca", "issue_serving", "load_serving", "plan",
    "server_context", "serving_sans", "utcnow",
]
