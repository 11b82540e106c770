"""Leader election on a ``coordination.k8s.io/v1`` Lease, as client-go's leaderelection does.

Several replicas run; the one holding the Lease writes, the others wait. The holder renews
every ``retry_period``; a replica takes the Lease over only when it has watched the record
stay unchanged for ``lease_duration`` (time measured on its own monotonic clock, so clock
skew between nodes does not matter). Every update carries the Lease's resourceVersion: of two
replicas racing for it, one gets 409 Conflict and stays a follower. A leader that cannot
renew for ``renew_deadline`` steps down; on shutdown it releases the Lease so a successor
need not wait.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone

from webhook import kinds, logs
from webhook.controller.kubeapi import ApiError, Conflict, KubeApi, NotFound

LEASE = kinds.LEASE

log = logs.get("controller.leader")


def micro_time(moment: datetime | None = None) -> str:
    """metav1.MicroTime on the wire."""
    moment = moment or datetime.now(timezone.utc)
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True)
class LeaseConfig:
    name: str = "infergate-controller"
    namespace: str = "default"
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0


class LeaderElector:
    def __init__(
        self,
        api: KubeApi,
        identity: str,
        config: LeaseConfig = LeaseConfig(),
        *,
        on_started: Callable[[], None] = lambda: None,
        on_stopped: Callable[[], None] = lambda: None,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.api, self.identity, self.config = api, identity, config
        self.on_started, self.on_stopped, self.clock = on_started, on_stopped, clock
        self.leading = False
        self.transitions_seen = 0
        self._observed: tuple | None = None  # (holder, renewTime, resourceVersion) last seen
        self._observed_at = 0.0
        self._last_renew = 0.0

    # -- one attempt (blocking: runs in a thread) ------------------------------------------

    def _record(self, previous: dict | None) -> dict:
        spec = (previous or {}).get("spec") or {}
        now = micro_time()
        mine = spec.get("holderIdentity") == self.identity
        return {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": max(1, round(self.config.lease_duration)),
            "acquireTime": spec.get("acquireTime") if mine and spec.get("acquireTime") else now,
            "renewTime": now,
            "leaseTransitions": int(spec.get("leaseTransitions") or 0) + (0 if mine or previous is None else 1),
        }

    def try_acquire_or_renew(self) -> bool:
        """One round: True when this replica holds the Lease afterwards."""
        cfg = self.config
        try:
            lease = self.api.get(LEASE, cfg.name, cfg.namespace)
        except NotFound:
            body = {"apiVersion": LEASE.api_version, "kind": LEASE.kind,
                    "metadata": {"name": cfg.name, "namespace": cfg.namespace}, "spec": self._record(None)}
            try:
                self.api.create(LEASE, body, cfg.namespace)
            except ApiError as exc:  # 409 AlreadyExists: another replica was faster
                log.debug("creating lease failed: %s", exc)
                return False
            return True
        spec, meta = lease.get("spec") or {}, lease.get("metadata") or {}
        observed = (spec.get("holderIdentity"), spec.get("renewTime"), meta.get("resourceVersion"))
        now = self.clock()
        if observed != self._observed:
            self._observed, self._observed_at = observed, now
        holder = spec.get("holderIdentity")
        duration = float(spec.get("leaseDurationSeconds") or cfg.lease_duration)
        if holder and holder != self.identity and now - self._observed_at < duration:
            return False
        updated = {**lease, "spec": {**spec, **self._record(lease)}}
        try:
            self.api.replace(LEASE, updated)
        except Conflict:
            return False
        return True

    def release(self) -> None:
        """Give the Lease up (holder cleared, duration 1s) if this replica holds it."""
        cfg = self.config
        try:
            lease = self.api.get(LEASE, cfg.name, cfg.namespace)
            spec = lease.get("spec") or {}
            if spec.get("holderIdentity") != self.identity:
                return
            now = micro_time()
            released = {**spec, "holderIdentity": "", "leaseDurationSeconds": 1, "renewTime": now, "acquireTime": now}
            self.api.replace(LEASE, {**lease, "spec": released})
        except ApiError as exc:
            log.warning("releasing lease %s/%s failed: %s", cfg.namespace, cfg.name, exc)

    # -- the loop ----------------------------------------------------------------------------

    def _set_leading(self, leading: bool) -> None:
        if leading == self.leading:
            return
        self.leading = leading
        self.transitions_seen += 1
        log.info("%s %s leadership of lease %s/%s", self.identity, "acquired" if leading else "lost",
                 self.config.namespace, self.config.name)
        (self.on_started if leading else self.on_stopped)()

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            attempt = asyncio.to_thread(self.try_acquire_or_renew)
            try:
                if self.leading:
                    # A renewal may not outlast the renew deadline (client-go bounds it the
                    # same way): a leader whose calls hang must stop before the Lease can
                    # expire for the others. A late answer from the abandoned call is harmless:
                    # it carries the old resourceVersion, or renews a Lease no one took.
                    left = self.config.renew_deadline - (self.clock() - self._last_renew)
                    held = await asyncio.wait_for(attempt, max(left, 0.0))
                else:
                    held = await attempt
            except (ApiError, TimeoutError) as exc:
                log.warning("lease %s/%s: %s", self.config.namespace, self.config.name, exc or "renewal timed out")
                held = None  # unknown: keep leading until the renew deadline
            now = self.clock()
            if held:
                self._last_renew = now
                self._set_leading(True)
            elif held is False or now - self._last_renew > self.config.renew_deadline:
                self._set_leading(False)
            try:
                await asyncio.wait_for(stop.wait(), self.config.retry_period)
            except asyncio.TimeoutError:
                pass
        if self.leading:
            self._set_leading(False)
            await asyncio.to_thread(self.release)
