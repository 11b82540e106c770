"""caBundle injection: the trust bundle written into the project's two webhook configurations,
at every certificate check and, through a watch, within moments of a configuration changing."""

from __future__ import annotations

import base64
import threading
import time
from typing import Any

from webhook import kinds
from webhook.certs.bundle import CertError
from webhook.certs.stores import api_json


# The project's two webhook configurations, as the ``kubernetes`` client names their calls.
WEBHOOK_CONFIGURATIONS = {
    kinds.MUTATING_WEBHOOK_CONFIGURATION.kind: "mutating_webhook_configuration",
    kinds.VALIDATING_WEBHOOK_CONFIGURATION.kind: "validating_webhook_configuration",
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
                obj = at_hand if at_hand is not None else api_json(
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
