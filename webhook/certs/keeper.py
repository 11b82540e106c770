"""The runtime: the live TLS context kept serving the current certificate (rotated, reloaded)."""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Sequence
from typing import Any

from cryptography import x509

from webhook.certs.bundle import CertBundle, CertConflict, CertError, not_after, utcnow
from webhook.certs.rotation import RotationPolicy, plan
from webhook.certs.stores import FileWatcher
from webhook.certs.tls import load_serving, server_context


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
        self.served: x509.Certificate | None = None  # the certificate the live context serves

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
        elif self.served != bundle.cert:
            load_serving(self.context, bundle)
        else:
            return False
        self.served = bundle.cert
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
        if not_after(self.bundle.cert) <= self.clock():
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
                            extra={"fields": {"expires": not_after(self.bundle.cert).isoformat()}})
