"""Rotation without an outage: what to do next, given the certificates and the clock (pure).

cert-controller rotates the CA and the serving certificate at once and replaces the bundle,
which leaves a window where the apiserver trusts only the new CA while the pod still serves
the old certificate (or the reverse) until the mounted Secret catches up. Here rotation is
staged instead, by :func:`plan`:

1. the CA nears expiry: a new CA is *appended* to the bundle; the serving certificate
   stays signed by the old one, which the bundle still trusts;
2. ``overlap`` later (every apiserver and replica has seen the new bundle): the serving
   certificate is reissued by the new CA;
3. ``overlap`` after that (every replica serves the new certificate): the old CA leaves
   the bundle. Expired CAs are always dropped.

A serving certificate renewed by the same CA needs no staging: the bundle trusts both.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass

from cryptography import x509

from webhook.certs.bundle import CertBundle, not_after, subject_alt_names
from webhook.certs.issuing import issue_ca, issue_serving


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
class Plan:
    bundle: CertBundle
    actions: tuple[str, ...] = ()  # human-readable, for the logs; empty: nothing changed

    @property
    def changed(self) -> bool:
        return bool(self.actions)


def plan(current: CertBundle | None, *, now: dt.datetime, sans: Sequence[str], policy: RotationPolicy) -> Plan:
    """The next state of the certificates (the stages: this module's docstring)."""
    if current is None:
        ca, ca_key = issue_ca(now=now, validity=policy.ca_validity, backdate=policy.backdate)
        cert, key = issue_serving(
            ca, ca_key, sans=sans, now=now, validity=policy.serving_validity, backdate=policy.backdate
        )
        return Plan(CertBundle((ca,), ca_key, cert, key), ("created CA and serving certificate",))

    actions: list[str] = []
    bundle = current

    # Expired CAs verify nothing; the signer is kept (the next step replaces it).
    live = tuple(ca for ca in bundle.trusted[:-1] if not_after(ca) > now) + (bundle.signer,)
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
    elif not_after(bundle.cert) <= now:
        reason = "serving certificate expired"
    elif not signer_spread:
        reason = None  # serving a cert from the new CA now would fail on lagging clients
    elif issuer != bundle.signer:
        reason = "serving certificate moved to the new CA"
    elif _due(bundle.cert, now, policy.renew_fraction):
        reason = "serving certificate due for renewal"
    elif set(subject_alt_names(bundle.cert)) != set(sans):
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


def _trusted_since(cert: x509.Certificate, policy: RotationPolicy) -> dt.datetime:
    """The latest moment it can have been issued: X.509 times drop the fraction of a
    second, so the true moment may be up to a second after the recorded one."""
    return cert.not_valid_before_utc + policy.backdate + dt.timedelta(seconds=1)


def _due(cert: x509.Certificate, now: dt.datetime, fraction: float) -> bool:
    lifetime = cert.not_valid_after_utc - cert.not_valid_before_utc
    return cert.not_valid_after_utc - now < lifetime * fraction
