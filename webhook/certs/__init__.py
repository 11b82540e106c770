"""The webhook's certificates: a CA, a serving certificate, and a rotation without an outage.

The apiserver trusts the webhook through ``caBundle``; the webhook proves itself with a
serving certificate signed by a CA in that bundle. One module per job:

- :mod:`~webhook.certs.bundle`: the ``CertBundle`` (trust bundle, signer key, serving pair)
  and what is read off a certificate;
- :mod:`~webhook.certs.issuing`: issuing a CA and a serving certificate, and its names;
- :mod:`~webhook.certs.rotation`: :func:`plan`, the staged rotation (pure: state and clock
  in, state out);
- :mod:`~webhook.certs.tls`: the server's and a client's TLS contexts;
- :mod:`~webhook.certs.stores`: the edges where the files live (a directory, a Secret);
- :mod:`~webhook.certs.cabundle`: the bundle written into the webhook configurations;
- :mod:`~webhook.certs.keeper`: the live TLS context kept serving the current certificate;
- :mod:`~webhook.certs.command`: ``infergate certs``.

Imported by the server (``webhook.server``), the ``certs`` command and the tests; it imports
nothing else of infergate.
"""

from webhook.certs.bundle import (CA_FILE, CA_KEY_FILE, CERT_FILE, FILES, KEY_FILE, CertBundle, CertConflict,
                                  CertError, expiry, key_pem, not_after, signed_by, subject_alt_names, utcnow)
from webhook.certs.cabundle import (
    WEBHOOK_CONFIGURATIONS, WebhookConfigurationWatch, ca_bundle_patch, inject_ca_bundle)
from webhook.certs.issuing import issue_ca, issue_serving, parse_namespaced, serving_sans
from webhook.certs.keeper import CertKeeper
from webhook.certs.rotation import Plan, RotationPolicy, plan
from webhook.certs.stores import DirectoryStore, FileWatcher, SecretStore
from webhook.certs.tls import client_context, load_serving, server_context

__all__ = [
    "CA_FILE", "CA_KEY_FILE", "CERT_FILE", "FILES", "KEY_FILE", "CertBundle", "CertConflict", "CertError", "CertKeeper",
    "DirectoryStore", "FileWatcher", "Plan", "RotationPolicy", "SecretStore", "WEBHOOK_CONFIGURATIONS",
    "WebhookConfigurationWatch", "ca_bundle_patch", "client_context", "expiry", "inject_ca_bundle", "issue_ca",
    "issue_serving", "key_pem", "load_serving", "not_after", "parse_namespaced", "plan", "server_context",
    "serving_sans", "signed_by", "subject_alt_names", "utcnow",
]
