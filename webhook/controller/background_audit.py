"""The background audit: every existing object of the kinds the webhook judges, judged against
the policies in force, its findings written as one report per object.

When it audits:

* at start (once the cluster view has synced), and whenever this replica becomes the leader;
* when the policies change (``--policies`` reloaded: every object again);
* when an object changes (its watch): that object;
* when the report API changes (the OpenReports CRD installed later: every object again);
* every ``--audit-interval`` seconds (0: never periodically): every object, which also catches
  what an object's verdict reads elsewhere (a Secret a policy looks up).

What it writes: per audited object, a report from ``webhook.audit.build_report`` (a Report for a
namespaced object, a ClusterReport for a cluster-scoped one; PolicyReport/ClusterPolicyReport
where only ``wgpolicyk8s.io`` is served; nothing where neither is: metrics and logs only), with an
ownerReference to the object, so the garbage collector deletes the report with it. A report is
written only when it differs from the stored one (``report_writes.unchanged``: the cluster view
watches the controller's own reports), so a converged resync writes nothing. An object in a namespace
the webhook never judges (``--audit-exempt-namespace``) is audited too, its report marked
exempt. Only the leader writes (and audits: a standby holds no results to expose).

The audit is CPU work and its writes blocking HTTP: :meth:`BackgroundAudit.step`, one round, runs
in a worker thread, never on the event loop.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from webhook import logs
from webhook.apiversion import group_of
from webhook.controller import report_writes
from webhook.controller.changes import ChangeFeed
from webhook.kinds import Kind
from webhook.controller.kubeapi import ApiError, Conflict, KubeApi, NotFound
from webhook.controller.metrics import ControllerMetrics

log = logs.get("controller.audit")

ObjectKey = tuple[str, str, str | None, str]  # (group, kind, namespace, name)
ReportKey = tuple[Kind, str | None, str]


@dataclass(frozen=True)
class AuditSettings:
    interval: float = 3600.0  # seconds between full scans; 0: none after the first
    exempt_namespaces: frozenset[str] = frozenset()  # never sent to the webhook; reported exempt
    max_results: int = 100  # results per report (build_report counts the overflow in the summary)
    policy_poll_interval: float = 2.0  # how often it looks at the policy files (and whether it leads)
    settle: float = 0.5  # after a change event, how long it waits for the changes that come with it
    rediscover_interval: float = 30.0  # how often it looks for a report CRD while the best is absent
    # how long a round waits for kinds the view watches since its first sync (a policy reload's
    # lookups, the params of the cluster's VAPs) to sync before it judges without them
    sync_wait: float = 30.0


def object_key(obj: Mapping[str, Any]) -> ObjectKey:
    meta = obj.get("metadata") or {}
    return group_of(obj.get("apiVersion")), str(obj.get("kind", "")), meta.get("namespace"), \
        str(meta.get("name", ""))


def judged(obj: Mapping[str, Any]) -> bool:
    """Whether the webhook would judge ``obj`` (the chart's matchConditions): not an object
    being deleted, and of HTTPRoutes only those with a backendRef to an InferencePool."""
    meta = obj.get("metadata") or {}
    if meta.get("deletionTimestamp"):
        return False
    if obj.get("kind") == "HTTPRoute" and group_of(obj.get("apiVersion")) == "gateway.networking.k8s.io":
        rules = (obj.get("spec") or {}).get("rules") or ()
        return any(isinstance(ref, Mapping) and ref.get("kind") == "InferencePool"
                   for rule in rules if isinstance(rule, Mapping) for ref in rule.get("backendRefs") or ())
    return True


class BackgroundAudit:
    """The audit loop. ``state`` is the cluster view (it watches ``kinds`` and the reports,
    labelled ``report_writes.MANAGED_BY``); ``policies`` the policy set in force (a
    ``PolicyDirectory``: ``poll()`` reloads it); ``auditor_for(policy_set)`` the function that
    audits one object under a policy set; ``build_report(audit, api=..., max_results=...,
    exempt=...)`` its report; ``served(api_version)`` the plurals discovery lists."""

    def __init__(
        self,
        state,
        api: KubeApi,
        policies,
        *,
        auditor_for: Callable[[Any], Callable[[Mapping[str, Any]], Any]],
        build_report: Callable[..., dict],
        kinds: Iterable[Kind],
        settings: AuditSettings = AuditSettings(),
        metrics: ControllerMetrics | None = None,
        leading: Callable[[], bool] = lambda: True,
        served: Callable[[str], Iterable[str]] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.state, self.api, self.policies, self.settings = state, api, policies, settings
        self.auditor_for, self.build_report = auditor_for, build_report
        self.kinds = tuple(kinds)
        self.metrics = metrics or ControllerMetrics()
        self.leading, self.clock = leading, clock
        self.served = served or api.served_resources
        self.feed = ChangeFeed(state, self.kinds)
        self.report_api: report_writes.ReportApi | None = None
        self._discovered_at: float | None = None
        self._policy_set = None
        self._policies_polled_at = -1e18
        self._auditor: Callable[[Mapping[str, Any]], Any] | None = None
        self._was_leading = False
        self._deferred = False  # a full scan put off while kinds were syncing
        self._pending: tuple[str, float] | None = None  # what the view is syncing, since when
        self._next_scan: float | None = None  # monotonic time of the next periodic scan
        self._report_feed: ChangeFeed | None = None
        # the last audit of every object: its counts by (policy, result), for the metric
        self._counts: dict[ObjectKey, Counter] = {}
        self._exported: set[tuple[str, str]] = set()
        # what this replica last wrote, by report: (resourceVersion written over, object returned)
        self._written: dict[ReportKey, tuple[str | None, dict]] = {}
        # resourceVersions its writes produced: their watch events are no news
        self._own_versions: dict[ReportKey, str | None] = {}
        self.scans = 0
        self.audits = 0
        self.writes = 0  # reports created or replaced, for metrics and tests

    # -- what it is told ---------------------------------------------------------------------

    def _discover(self, now: float) -> bool:
        """Look for the report APIs when due (at start; then, while the preferred one is
        absent, every ``rediscover_interval``); True when the choice changed."""
        first = self._discovered_at is None
        if not first and (self.report_api is report_writes.REPORT_APIS[0]
                          or now - self._discovered_at < self.settings.rediscover_interval):
            return False
        self._discovered_at = now
        try:
            chosen = report_writes.choose(lambda version: set(self.served(version)))
        except ApiError as exc:
            log.warning("audit: cannot look for the report APIs (%s); trying again later", exc)
            return False
        if chosen is self.report_api and not first:
            return False
        self.report_api = chosen
        self._report_feed = None if chosen is None else ChangeFeed(self.state, chosen.kinds)
        if chosen is None:  # said once: a later look finding nothing again says nothing
            log.info("audit: neither %s nor %s is served: findings go to metrics and logs only, no reports "
                     "(install the OpenReports CRDs to get reports)",
                     report_writes.OPENREPORTS.api_version, report_writes.WGPOLICY.api_version)
        else:
            log.info("audit: writing reports as %s", chosen)
        return True

    def _load_policies(self, now: float) -> bool:
        """The policy set in force (reloaded when due); True when it changed."""
        if now - self._policies_polled_at >= self.settings.policy_poll_interval:
            self._policies_polled_at = now
            poll = getattr(self.policies, "poll", None)
            if poll is not None:
                poll()
        current = self.policies.current()
        if self._policy_set is current:
            return False
        changed = self._policy_set is not None
        self._policy_set, self._auditor = current, self.auditor_for(current)
        if changed:
            log.info("audit: the policies changed: auditing every object again")
        return True

    # -- one round ---------------------------------------------------------------------------

    def step(self) -> int:
        """One round: what is due (a full scan, or the objects that changed); returns the
        number of objects audited. Blocking: run it in a thread."""
        now = self.clock()
        leading = self.leading()
        if not leading:
            if self._was_leading:
                self._written.clear()
                self._own_versions.clear()
            self._was_leading = False
            return 0
        full = not self._was_leading  # at start, and on becoming the leader
        self._was_leading = True
        full |= self._discover(now)
        full |= self._load_policies(now)
        if self._next_scan is not None and self.settings.interval > 0 and now >= self._next_scan:
            full = True
        if self._syncing(now):
            self._deferred |= full
            return 0
        full |= self._deferred
        self._deferred = False
        changes = self.feed.poll()
        report_changes = self._report_feed.poll() if self._report_feed is not None else []
        if full:
            return self.scan()
        keys = {object_key(c.obj) for c in changes}
        # a report changed or deleted by someone else: its object's report is written again
        for change in report_changes:
            if not self._own(change):
                owner = report_writes.scope_key(change.obj)
                if owner is not None:
                    keys.add((group_of(owner[0]), owner[1], owner[2], owner[3]))
        audited = 0
        for key in sorted(keys, key=lambda k: (k[0], k[1], k[2] or "", k[3])):
            audited += self._one(key)
        if audited or changes:
            self._export()
        return audited

    def _syncing(self, now: float) -> bool:
        """Whether to wait for kinds the view watches since its first sync and has not synced
        yet: judged now, what reads them would be left out as unknown, a report written without
        it, and written again once they sync. At most ``sync_wait`` seconds for the same kinds (a
        kind RBAC forbids never syncs: judged without it then, as unknown)."""
        pending = getattr(self.state, "pending", None)
        if not pending:
            self._pending = None
            return False
        if self._pending is None or self._pending[0] != pending:
            self._pending = (pending, now)
            log.info("audit: waiting for the cluster view (%s)", pending)
        return now - self._pending[1] < self.settings.sync_wait

    def scan(self) -> int:
        """Audit every object of every audited kind now; returns how many."""
        started = self.clock()
        keys = [object_key(obj) for kind in self.kinds for obj in self.state.list(kind.api_version, kind.kind)]
        present = set(keys)
        for gone in [k for k in self._counts if k not in present]:
            del self._counts[gone]
        audited = sum(self._one(key) for key in keys)
        self.scans += 1
        ended = self.clock()
        self._next_scan = ended + self.settings.interval if self.settings.interval > 0 else None
        self.metrics.audit_scan_seconds.observe(max(0.0, ended - started))
        self.metrics.audit_objects.set(audited)
        self.metrics.audit_last_scan.set(time.time())
        self._export()
        summary: Counter = Counter()
        for counts in self._counts.values():
            for (_, result), n in counts.items():
                summary[result] += n
        log.info("audit: %d objects audited (%s)", audited,
                 ", ".join(f"{n} {result}" for result, n in sorted(summary.items())) or "no results")
        return audited

    def _kind_of(self, key: ObjectKey) -> Kind | None:
        for kind in self.kinds:
            if (kind.group, kind.kind) == key[:2]:
                return kind
        return None

    def _one(self, key: ObjectKey) -> int:
        kind = self._kind_of(key)
        obj = None if kind is None else self.state.get(kind.api_version, kind.kind, key[3], key[2])
        if obj is None or not judged(obj):
            self._counts.pop(key, None)
            return 0  # deleted: its report goes with it (ownerReference, the garbage collector)
        try:
            audit = self._auditor(obj)
        except Exception:  # noqa: BLE001 - one object must not stop the audit of the others
            self.metrics.audit_failures.inc()
            log.exception("audit of %s %s/%s failed", key[1], key[2] or "", key[3])
            return 0
        self.audits += 1
        counts = Counter((r.policy, r.result) for r in audit.results)
        self._counts[key] = counts
        for result in audit.results:
            if result.result in ("fail", "error"):
                log.debug("audit: %s %s/%s: %s %s: %s", key[1], key[2] or "", key[3], result.policy, result.result,
                          result.message)
        if self.report_api is not None:
            self._report(key, kind, audit)
        return 1

    # -- reports -----------------------------------------------------------------------------

    def _report(self, key: ObjectKey, kind: Kind, audit) -> None:
        api = self.report_api
        exempt = bool(key[2]) and key[2] in self.settings.exempt_namespaces
        desired = self.build_report(audit, api=api.api_version, max_results=self.settings.max_results, exempt=exempt)
        report_kind = api.kind_for(kind.namespaced)
        meta = desired.get("metadata") or {}
        report_key = (report_kind, meta.get("namespace"), str(meta.get("name", "")))
        stored = self._stored(report_key)
        if report_writes.unchanged(stored, desired) or not self.leading():
            return  # (leadership lost in the middle of a scan: the new leader writes)
        try:
            self._write(report_key, desired, stored)
        except ApiError as exc:
            self.metrics.audit_failures.inc()
            log.warning("audit: %s %s/%s not written (%s); written again at the next scan", report_kind.kind,
                        report_key[1] or "", report_key[2], exc)

    def _stored(self, key: ReportKey) -> dict | None:
        """The report as stored: the cluster view's, or this replica's own write while the view
        has not caught up with it."""
        kind, namespace, name = key
        cached = self.state.get(kind.api_version, kind.kind, name, namespace)
        written = self._written.get(key)
        if written is not None:
            over, result = written
            cached_version = ((cached or {}).get("metadata") or {}).get("resourceVersion")
            if cached_version == over:
                return result
            del self._written[key]
        return cached

    def _write(self, key: ReportKey, desired: dict, stored: dict | None) -> None:
        kind, namespace, _ = key
        for _attempt in range(3):
            body = report_writes.for_writing(desired, stored)
            try:
                if stored is None:
                    result = self.api.create(kind, body, namespace)
                    verb = "create"
                else:
                    result = self.api.replace(kind, body)
                    verb = "update"
            except (Conflict, NotFound) as exc:
                # created meanwhile (409 AlreadyExists), changed (409), or gone (404): read it again
                try:
                    stored = self.api.get(kind, key[2], namespace)
                except NotFound:
                    if isinstance(exc, NotFound) and stored is None:
                        raise  # the create itself was refused: no such namespace (being deleted)
                    stored = None
                if report_writes.unchanged(stored, desired):
                    return
                continue
            self.writes += 1
            self.metrics.audit_writes.labels(kind.kind, verb).inc()
            over = ((stored or {}).get("metadata") or {}).get("resourceVersion")
            self._written[key] = (over, result)
            self._own_versions[key] = (result.get("metadata") or {}).get("resourceVersion")
            return
        raise Conflict(409, "the report kept changing while it was written")

    def _own(self, change) -> bool:
        """Whether a change of a report is this replica's own write coming back through the watch."""
        meta = change.obj.get("metadata") or {}
        if change.deleted or self.report_api is None:
            return False
        kind = next((k for k in self.report_api.kinds if k.kind == change.obj.get("kind")), None)
        key = (kind, meta.get("namespace"), str(meta.get("name", "")))
        if self._own_versions.get(key) != meta.get("resourceVersion"):
            return False
        del self._own_versions[key]  # seen: no need to remember it any longer
        return True

    def _export(self) -> None:
        totals: Counter = Counter()
        for counts in self._counts.values():
            totals.update(counts)
        for labels in self._exported - set(totals):
            self.metrics.audit_results.labels(*labels).set(0)
        for (policy, result), n in totals.items():
            self.metrics.audit_results.labels(policy, result).set(n)
        self._exported |= set(totals)

    # -- the loop ----------------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        """Until ``stop`` is set: a round (in a thread) whenever the state says an audited
        object or a report changed, ``settle`` seconds after the first event so that a burst
        (an object and the status the controller writes for it) makes one round and one
        report; and at the latest every ``policy_poll_interval`` seconds (the policy files,
        leadership, the report APIs and the periodic scan are looked at then)."""
        wait_ready = getattr(self.state, "wait_ready", None)
        if wait_ready is not None:
            while not await wait_ready(1.0):
                if stop.is_set():
                    return
        changed = asyncio.Event()
        loop = asyncio.get_running_loop()
        for kind in (*self.kinds, *(k for api in report_writes.REPORT_APIS for k in api.kinds)):
            # the state calls back from the thread that wrote: a watch's, or the loop's own
            self.state.on_change(kind.api_version, kind.kind, lambda: loop.call_soon_threadsafe(changed.set))
        stopped = asyncio.create_task(stop.wait())
        try:
            while not stop.is_set():
                changed.clear()
                try:
                    await asyncio.to_thread(self.step)
                except Exception:  # noqa: BLE001 - the loop must outlive any surprise; the next round retries
                    self.metrics.audit_failures.inc()
                    log.exception("audit round failed")
                woken = asyncio.create_task(changed.wait())
                await asyncio.wait((woken, stopped), timeout=self.settings.policy_poll_interval,
                                   return_when=asyncio.FIRST_COMPLETED)
                woken.cancel()
                if changed.is_set():
                    await asyncio.wait((stopped,), timeout=self.settings.settle)
        finally:
            stopped.cancel()
