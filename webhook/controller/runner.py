"""``infergate controller``: keep the status of every owned object true, in a cluster.

    infergate controller                       # in-cluster (ServiceAccount)
    infergate controller --kubeconfig ~/.kube/config

The moving parts, each in its own module:

* the cluster view: ``webhook.state.KubeState``, a watch cache (list + watch) of every kind
  the reconcilers read;
* ``ChangeFeed`` + ``affected_keys`` (``changes``): which objects need a new status after a change;
* ``WorkQueue``: de-duplicated keys, per-key exponential backoff on failure;
* the pure reconcilers: object + view -> desired status;
* ``KubeApi``: a server-side apply to ``/status`` of the fields the controller owns, under its
  own field manager, with the resourceVersion read, only when it would change something (zero
  writes at steady state); a 409 re-reads the object, recomputes and tries again; a field
  another manager owns is left to it (``ownership``: which kinds it writes at all);
* ``EventRecorder``: Events for notable transitions;
* ``LeaderElector``: only the replica holding the Lease writes;
* ``BackgroundAudit`` (``background_audit``): every existing object of the kinds the webhook judges,
  judged by the policies (``--policies``), one report per object (``--audit``, on by default);
* ``NativePolicies`` (``native_policies``, ``--native-policies``): the policies' generated
  ValidatingAdmissionPolicies and MutatingAdmissionPolicies kept applied in the cluster and
  proven enforced.

SIGTERM/SIGINT: stop taking work, finish what is in flight, release the Lease, exit 0.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import socket
import threading
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING

from aiohttp import web

from webhook import command_line, kinds, logs
from webhook.audit import Auditor, build_report
from webhook.controller import report_writes
from webhook.controller.changes import ChangeFeed, Key, affected_keys, all_owned, invalidates_inventory
from webhook.controller.context import ReconcileContext, Settings, build_inventory
from webhook.controller.background_audit import AuditSettings, BackgroundAudit
from webhook.controller.events import EventRecorder
from webhook.controller.kubeapi import ApiError, Conflict, KubeApi, NotFound, OwnedElsewhere
from webhook.controller.leader import LeaderElector, LeaseConfig
from webhook.controller.metrics import ControllerMetrics, health_app
from webhook.controller.ownership import applied_unchanged, status_writes
from webhook.controller.planner import Inventory, seconds_until_stuck
from webhook.controller.reconcilers import RECONCILERS, reads_of
from webhook.state.selectors import selector_string
from webhook.controller.workqueue import ShutDown, WorkQueue
from webhook.gocompat.time import parse_go_duration
from webhook.inputs import watches
from webhook.inputs.kube import KubeClientConfig, KubeConfigError
from webhook.inputs.kube import api_client as kube_api_client
from webhook.inputs.policies import PolicySource, load_policy_directory
from webhook.policy.loader import PolicyLoadError
from webhook.policy.native.cluster import ClusterNativePolicies
from webhook.schema import bundled
from webhook.state.kube import KubeState, WatchedKind

if TYPE_CHECKING:
    from webhook.cel import Evaluator

log = logs.get("controller")

CONFLICT_ATTEMPTS = 3


def _order(key: Key) -> tuple:
    # a deterministic order: classes first, then by kind, namespace, name
    return (key[0] != kinds.INFERENCE_SERVICE_CLASS, key[0].kind, key[1] or "", key[2])


@dataclass(frozen=True)
class RunnerConfig:
    workers: int = 4
    settle: float = 0.1  # after a change event, how long it waits for the changes that come with it
    resync_interval: float = 600.0  # full re-reconcile, a safety net
    base_retry_delay: float = 0.2
    max_retry_delay: float = 300.0


class Controller:
    def __init__(
        self,
        state,
        api: KubeApi,
        *,
        evaluator: Evaluator,
        settings: Settings = Settings(),
        config: RunnerConfig = RunnerConfig(),
        elector: LeaderElector | None = None,
        recorder: EventRecorder | None = None,
        metrics: ControllerMetrics | None = None,
        clock=lambda: datetime.now(timezone.utc),
        writes_status: frozenset[kinds.Kind] | None = None,
    ):
        self.state, self.api, self.settings, self.config = state, api, settings, config
        self.evaluator = evaluator  # the DeviceClasses' CEL selectors
        # the kinds whose status it writes (``ownership.status_writes``: KubeAI's Model is not one
        # by default)
        self.writes_status = status_writes() if writes_status is None else writes_status
        self.elector, self.recorder, self.clock = elector, recorder, clock
        self.metrics = metrics or ControllerMetrics()
        self.queue = WorkQueue(base_delay=config.base_retry_delay, max_delay=config.max_retry_delay)
        self.feed = ChangeFeed(state, reads_of(self.writes_status))
        self._inventory: Inventory | None = None
        self._inventory_generation = 0  # bumped when a DeviceClass or ResourceSlice changes
        self._inventory_lock = asyncio.Lock()
        # what this replica last wrote, by key: (resourceVersion written over, object returned)
        self._written: dict[Key, tuple[str | None, dict]] = {}
        # resourceVersions this replica's writes produced: their change events are no news
        self._own_versions: dict[Key, str] = {}
        self.reconciles = 0
        self.conflicts = 0
        # the state's change events set ``_changed``; the change loop then asks the feed what moved
        self._changed = asyncio.Event()
        self._running = False  # the first poll and the full enqueue are done
        # set while nothing is queued, in flight, scheduled for later (a retry, a replan check)
        # or changed in the state and not yet looked at: what a caller waits on (with a
        # deadline) to see the controller's answer to what it changed
        self.idle = asyncio.Event()
        self.quiet = asyncio.Event()  # as ``idle``, with retries and replan checks scheduled for later
        self.queue.on_change = self._signal
        if elector is not None:
            elector.on_started, elector.on_stopped = self._started_leading, self._stopped_leading

    # -- leadership -------------------------------------------------------------------------

    @property
    def leading(self) -> bool:
        return self.elector is None or self.elector.leading

    def _started_leading(self) -> None:
        self.metrics.leader.set(1)
        self._written.clear()  # another replica may have written meanwhile
        self._own_versions.clear()
        self.enqueue_all()

    def _stopped_leading(self) -> None:
        self.metrics.leader.set(0)
        log.info("not the leader: no status writes until the Lease is held again")

    # -- inputs ------------------------------------------------------------------------------

    def inventory(self) -> Inventory:
        if self._inventory is None:
            self._inventory = build_inventory(self.state, self.evaluator)
        return self._inventory

    def enqueue_all(self) -> None:
        for key in all_owned(self.state, [k for k in kinds.OWNED if k in self.writes_status]):
            self.queue.add(key)
        self._signal()

    def _signal(self) -> None:
        """``idle`` and ``quiet`` as the queue and the unread changes now are."""
        unread = self._changed.is_set() or not self._running
        for event, settled in ((self.idle, self.queue.idle), (self.quiet, self.queue.quiet)):
            if settled and not unread:
                event.set()
            else:
                event.clear()

    def _listen(self, loop: asyncio.AbstractEventLoop) -> None:
        """Be woken by every change to a kind the feed reads: the state calls back from the
        thread that wrote (a watch's, or the loop's own)."""
        def changed_here() -> None:
            self._changed.set()
            self._signal()

        def changed() -> None:
            if threading.get_ident() == loop_thread:
                changed_here()
            else:
                loop.call_soon_threadsafe(changed_here)

        loop_thread = threading.get_ident()
        for kind in self.feed.watched:
            self.state.on_change(kind.api_version, kind.kind, changed)

    def poll_changes(self) -> int:
        """Queue everything whose status may depend on what changed; returns the change count."""
        self.metrics.leader.set(1 if self.leading and self.elector is not None else 0)
        changes = [change for change in self.feed.poll() if not self._own_write(change)]
        if any(invalidates_inventory(change) for change in changes):
            self._inventory = None
            self._inventory_generation += 1
        for key in sorted(affected_keys(changes, self.state, self.writes_status), key=_order):
            self.queue.add(key)
        return len(changes)

    def _own_write(self, change) -> bool:
        meta = change.obj.get("metadata") or {}
        key = (change.kind, meta.get("namespace"), meta.get("name", ""))
        if change.deleted:
            self._own_versions.pop(key, None)
            self._written.pop(key, None)
            return False
        version = self._own_versions.get(key)
        if version is None:
            return False
        if version == meta.get("resourceVersion"):
            # the cache has caught up with our write: no need to remember it any longer
            del self._own_versions[key]
            self._written.pop(key, None)
            return True
        return False

    # -- one key -----------------------------------------------------------------------------

    def _current(self, key: Key) -> dict | None:
        kind, namespace, name = key
        cached = self.state.get(kind.api_version, kind.kind, name, namespace)
        if cached is None:
            self._written.pop(key, None)
            return None
        written = self._written.get(key)
        if written is not None:
            over, result = written
            if (cached.get("metadata") or {}).get("resourceVersion") == over:
                return result  # the cache has not seen our own write yet
            del self._written[key]
        return cached

    def desired_status(self, obj: Mapping, kind: kinds.Kind) -> dict:
        ctx = ReconcileContext(state=self.state, now=self.clock(), evaluator=self.evaluator, settings=self.settings,
                               inventory_source=self.inventory)
        self.reconciles += 1
        self.metrics.reconciles.labels(kind.kind).inc()
        return RECONCILERS[kind](obj, ctx)

    async def _ensure_inventory(self) -> None:
        # Evaluating every DeviceClass's selectors takes a while: off the loop, once.
        async with self._inventory_lock:
            while self._inventory is None:
                generation = self._inventory_generation
                inventory = await asyncio.to_thread(build_inventory, self.state, self.evaluator)
                if generation == self._inventory_generation:  # else: devices moved meanwhile
                    self._inventory = inventory

    async def sync(self, key: Key) -> None:
        """Reconcile one object; write its status if it changed.

        The reconcile is pure CPU and short, so it runs on the loop; the HTTP calls run in
        threads. A 409 re-reads the object from the API and reconciles again.
        """
        kind = key[0]
        if not self.leading:
            return  # the leader's job; everything is queued again on becoming leader
        obj = self._current(key)
        if obj is None:
            return
        if kind == kinds.INFERENCE_SERVICE:
            await self._ensure_inventory()
        for attempt in range(CONFLICT_ATTEMPTS):
            desired = self.desired_status(obj, kind)
            if applied_unchanged(obj, desired) or not self.leading:
                return
            try:
                result = await asyncio.to_thread(self.api.apply_status, kind, obj, desired)
            except OwnedElsewhere as exc:
                # another controller writes these fields: never forced; its next change retries
                self.metrics.conflicts.labels(kind.kind).inc()
                log.warning("status of %s %s/%s left to its other writer: %s", kind.kind, key[1] or "", key[2],
                            exc.message)
                return
            except Conflict:
                self.conflicts += 1
                self.metrics.conflicts.labels(kind.kind).inc()
                if attempt + 1 == CONFLICT_ATTEMPTS:
                    raise
                obj = await asyncio.to_thread(self.api.get, kind, key[2], key[1])
                continue
            except NotFound:
                return
            self.metrics.writes.labels(kind.kind).inc()
            result.setdefault("apiVersion", kind.api_version)
            result.setdefault("kind", kind.kind)
            self._written[key] = ((obj.get("metadata") or {}).get("resourceVersion"), result)
            self._own_versions[key] = (result.get("metadata") or {}).get("resourceVersion")
            if self.recorder is not None:
                await asyncio.to_thread(self.recorder.record, kind, result, obj.get("status"), desired)
            return

    def _replan_check_in(self, key: Key) -> float | None:
        """Seconds until a pending claim of an order may trigger a replan."""
        kind, namespace, name = key
        if kind != kinds.INFERENCE_SERVICE:
            return None
        obj = self._current(key)
        device_class = (((obj or {}).get("status") or {}).get("resolved") or {}).get("deviceClass")
        if not device_class:
            return None
        claims = self.state.list(
            kinds.RESOURCE_CLAIM.api_version, kinds.RESOURCE_CLAIM.kind, namespace,
            selector_string({kinds.INFERENCE_SERVICE_LABEL: name}),
        )
        wait = seconds_until_stuck(claims, device_class, self.clock(), self.settings.replan_timeout)
        # a claim is stuck once strictly older than the timeout: wake just after that
        return None if wait is None else wait + 0.1

    # -- loops -------------------------------------------------------------------------------

    async def _worker(self) -> None:
        while True:
            try:
                key = await self.queue.get()
            except ShutDown:
                return
            try:
                await self.sync(key)
            except Exception as exc:  # noqa: BLE001 - API errors and bugs alike: one object must not stop the loop
                delay = self.queue.add_rate_limited(key)
                self.metrics.failures.labels(key[0].kind).inc()
                log.warning("status of %s %s/%s not written (%s); retry in %.1fs",
                            key[0].kind, key[1] or "", key[2], exc, delay,
                            exc_info=not isinstance(exc, (ApiError, OSError)))  # a bug: keep its trace
            else:
                self.queue.forget(key)
                wait = self._replan_check_in(key)
                if wait is not None:
                    self.queue.add_after(key, wait)
            finally:
                self.queue.done(key)
                self.metrics.queue_depth.set(len(self.queue))

    async def _watch_changes(self, stop: asyncio.Event) -> None:
        """Ask the feed what moved each time the state says something changed (``settle``
        seconds after the first event: changes that come together are read in one go), and
        resync everything every ``resync_interval``."""
        loop = asyncio.get_running_loop()
        next_resync = loop.time() + self.config.resync_interval
        stopped = asyncio.create_task(stop.wait())
        try:
            while not stop.is_set():
                woken = asyncio.create_task(self._changed.wait())
                await asyncio.wait((woken, stopped), timeout=max(0.0, next_resync - loop.time()),
                                   return_when=asyncio.FIRST_COMPLETED)
                woken.cancel()
                if self._changed.is_set():
                    # a burst (a rollout's Pods) is read in one go: the feed's walk runs at most
                    # once per ``settle`` however fast the events come
                    await asyncio.wait((stopped,), timeout=self.config.settle)
                    self._changed.clear()
                    self.poll_changes()
                if loop.time() >= next_resync:
                    self.enqueue_all()
                    next_resync = loop.time() + self.config.resync_interval
                self._signal()
        finally:
            stopped.cancel()

    async def run(self, stop: asyncio.Event) -> None:
        """Until ``stop`` is set; then drain in-flight work and release the Lease."""
        wait_ready = getattr(self.state, "wait_ready", None)
        if wait_ready is not None:
            waited = 0
            while not await wait_ready(1.0):
                if stop.is_set():
                    return
                waited += 1
                if waited % 10 == 0:  # e.g. a kind the ServiceAccount may not list
                    log.warning("still waiting for the cluster view to sync (%d s)", waited)
        self._listen(asyncio.get_running_loop())
        self.feed.poll()  # the first poll sees every object as new: queue each once
        self._running = True
        self.enqueue_all()
        tasks = [asyncio.create_task(self._watch_changes(stop), name="changes")]
        tasks += [asyncio.create_task(self._worker(), name=f"worker-{i}") for i in range(self.config.workers)]
        if self.elector is not None:
            tasks.append(asyncio.create_task(self.elector.run(stop), name="leader-election"))
        await stop.wait()
        self.queue.shut_down()
        await asyncio.gather(*tasks, return_exceptions=True)


# -- the command ------------------------------------------------------------------------------


EXAMPLES = """\
infergate controller                                   # in a pod: in-cluster config, leader-elected
infergate controller --kubeconfig ~/.kube/config --no-leader-elect --log-level debug
infergate controller --metrics-port 8080               # /healthz, /readyz and /metrics on :8080
infergate controller --policies /etc/infergate/policies --audit-interval 30m \
    --audit-exempt-namespace kube-system               # audit with these policies every 30 minutes
infergate controller --no-audit                        # status only: no background audit, no reports
infergate controller --audit-native-policies           # also audit by the cluster's own ValidatingAdmissionPolicies
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.epilog = command_line.epilog(EXAMPLES, exit_codes=command_line.SERVICE_EXIT_CODES)
    parser.add_argument("--kubeconfig", default=None, help="kubeconfig file (default: in-cluster, then $KUBECONFIG or ~/.kube/config)")
    parser.add_argument("--context", default=None, help="kubeconfig context")
    parser.add_argument("--leader-elect", action=argparse.BooleanOptionalAction, default=True,
                        help="hold a Lease so that one replica writes (default: on)")
    parser.add_argument("--lease-namespace", default=None,
                        help="namespace of the leader-election Lease (default: $POD_NAMESPACE, else default)")
    parser.add_argument("--lease-name", default="infergate-controller",
                        help="name of the leader-election Lease (default: infergate-controller)")
    parser.add_argument("--identity", default=None, help="this replica's name in the Lease (default: hostname + random)")
    parser.add_argument("--workers", type=int, default=4, help="objects reconciled at once (default 4)")
    parser.add_argument("--replan-timeout", type=float, default=300.0, metavar="SECONDS",
                        help="a ResourceClaim unallocated this long triggers a replan (default 300)")
    parser.add_argument("--replan-limit", type=int, default=3, help="replans before Planned=False (default 3)")
    parser.add_argument("--resync-interval", type=float, default=600.0, metavar="SECONDS",
                        help="every object is reconciled again at least this often (default 600)")
    parser.add_argument("--public-domain-template", default=None,
                        help="Deckhouse publicDomainTemplate for External endpoints (default: ModuleConfig global)")
    parser.add_argument("--status-writes", action="append", default=[], metavar="KIND=on|off",
                        help="write status of KIND (<plural>.<group>, e.g. models.kubeai.org) or not; repeatable. "
                             "Default: every infergate kind, not KubeAI's Model (KubeAI's controller owns its status)")
    parser.add_argument("--audit", action=argparse.BooleanOptionalAction, default=True,
                        help="audit every existing object of the kinds the webhook judges and write one report "
                             "(OpenReports, else wgpolicyk8s.io PolicyReport) per object (default: on)")
    parser.add_argument("--policies", "--policies-dir", dest="policies", default=None, metavar="DIR",
                        help="the policies the audit judges by, reloaded when they change (default: the shipped "
                             "policies/)")
    parser.add_argument("--policy-actions", action="append", default=[], metavar="NAME=ACTION[,ACTION][@SELECTOR]",
                        help="the webhook's overrides of policies' validation actions (the same flag as infergate "
                             "serve's: the audit's results follow the actions in force); repeatable")
    parser.add_argument("--audit-interval", default="1h", metavar="DURATION",
                        help="a full audit this often besides those at start, on policy and object changes: "
                             "a Go duration (30m, 1h) or seconds; 0 turns periodic scans off (default 1h)")
    parser.add_argument("--audit-exempt-namespace", action="append", default=[], metavar="NAMESPACE",
                        help="a namespace the webhook never judges (the chart's: kube-system and its own): "
                             "still audited, its reports marked exempt; repeatable, or comma-separated")
    parser.add_argument("--audit-native-policies", action=argparse.BooleanOptionalAction, default=False,
                        help="also audit the objects against the cluster's own ValidatingAdmissionPolicies and their "
                             "bindings (not those infergate generated), their results in the same reports; watches "
                             "the policies, the bindings and the params they name (default: off)")
    parser.add_argument("--audit-max-results", type=int, default=AuditSettings.max_results, metavar="N",
                        help=f"results kept per report, the rest counted in its summary (default "
                             f"{AuditSettings.max_results})")
    parser.add_argument("--native-policies", action=argparse.BooleanOptionalAction, default=False,
                        help="apply the policies' rules the apiserver can run itself as ValidatingAdmissionPolicies "
                             "and bindings (infergate native-policies), prove them enforced with a dry-run probe and "
                             "mark them so the webhook (serve --native-policies) leaves them to the apiserver; "
                             "docs/native-policies.md (default: off)")
    parser.add_argument("--native-policies-owner", default=None, metavar="CLUSTERROLE",
                        help="the ClusterRole that owns the generated objects (the chart's: uninstalling it "
                             "deletes them through the garbage collector; default: no owner)")
    parser.add_argument("--metrics-port", type=int, default=0,
                        help="serve /healthz, /readyz and /metrics on this port (default: off)")
    parser.add_argument("--log-level", default="info", type=command_line.log_level, metavar="LEVEL",
                        help="debug, info, warning or error, in any case (default info)")


CONTROLLER_CLIENT_POOL = 64  # connections: more than the watch cache's watches


def kube_client_config(kubeconfig: str | None, context: str | None) -> KubeClientConfig:
    """The controller's client: ``--kubeconfig`` at ``--context``, else in a pod its service
    account, else $KUBECONFIG or ~/.kube/config; a pool for every watch of its cache. Its
    writes name their field manager themselves (``ownership.FIELD_MANAGER``)."""
    return KubeClientConfig(kubeconfig=Path(kubeconfig) if kubeconfig else None, context=context,
                            pool_size=CONTROLLER_CLIENT_POOL)


def served_kinds(api: KubeApi) -> tuple[kinds.Kind, ...]:
    """The kinds to watch: those the cluster serves. A missing optional API (no cert-manager,
    no ai-models catalog, no Deckhouse) is left out, so the watch cache can sync."""
    served: dict[str, set[str]] = {}
    for kind in kinds.WATCHED:
        if kind.api_version not in served:
            served[kind.api_version] = api.served_resources(kind.api_version)
    present = tuple(k for k in kinds.WATCHED if k.plural in served[k.api_version])
    for kind in kinds.WATCHED:
        if kind not in present:
            log.info("%s (%s) is not served by this cluster: not watched", kind.kind, kind.api_version)
    return present


def audit_interval(text: str) -> float:
    """``--audit-interval``: a Go duration (``30m``, ``1h``) or seconds, >= 0."""
    try:
        seconds = float(text)
    except ValueError:
        nanoseconds = parse_go_duration(text.strip())
        if nanoseconds is None:
            raise ValueError(f"--audit-interval {text!r}: expected a duration such as 30m or 1h, or seconds") from None
        seconds = nanoseconds / 1e9
    if seconds < 0 or seconds != seconds:
        raise ValueError(f"--audit-interval {text!r}: must be 0 (no periodic scans) or more")
    return seconds


def audit_settings(interval: str = "1h", exempt_namespaces: Iterable[str] = (),
                   max_results: int = AuditSettings.max_results) -> AuditSettings:
    """The audit's settings from its flags' values (``--audit-interval``, each
    ``--audit-exempt-namespace``, comma-separated or not, ``--audit-max-results``); ValueError
    naming the flag that is wrong."""
    if max_results < 1:
        raise ValueError(f"--audit-max-results {max_results}: must be 1 or more")
    exempt = frozenset(ns.strip() for item in exempt_namespaces for ns in item.split(",") if ns.strip())
    return AuditSettings(interval=audit_interval(interval), exempt_namespaces=exempt, max_results=max_results)


@dataclass(frozen=True)
class ControllerConfig:
    """What ``infergate controller`` runs with: its flags (the chart's Deployment passes them,
    and ``POD_NAMESPACE`` for the Lease's namespace), checked before anything starts."""

    evaluator: Evaluator
    client: KubeClientConfig
    identity: str | None  # this replica's name in the Lease (None: hostname + random)
    lease: LeaseConfig | None  # None: no leader election (every replica writes)
    reconcile: Settings
    runner: RunnerConfig
    writes_status: frozenset[kinds.Kind]  # the kinds whose status it writes (``--status-writes``)
    audit: AuditSettings | None  # None: no background audit
    policies: PolicySource  # the audit's
    metrics_port: int = 0  # 0: no /healthz, /readyz and /metrics
    # the audit also judges by the cluster's own ValidatingAdmissionPolicies (``--audit-native-policies``)
    audit_native_policies: bool = False
    # the policies' exportable rules applied as ValidatingAdmissionPolicies, probed and marked
    # (``--native-policies``; ``webhook.controller.native_policies``), owned by this ClusterRole
    native_policies: bool = False
    native_policies_owner: str | None = None
    native_probe_namespace: str = "default"  # where the probe's dry-run ConfigMap is created

    @classmethod
    def from_flags(cls, args: argparse.Namespace, evaluator: Evaluator,
                   environ: Mapping[str, str] = os.environ) -> ControllerConfig:
        """The configuration of ``add_arguments``' flags and ``environ`` (``POD_NAMESPACE``, the
        Downward API's, for the Lease when no flag names one); ValueError (one line naming the
        flag) when one is wrong."""
        if args.workers < 1 or args.replan_limit < 0 or args.replan_timeout < 0:
            raise ValueError("--workers must be >= 1, replan settings >= 0")
        writes_status = status_writes(args.status_writes)  # StatusWritesError: a ValueError
        audit = audit_settings(args.audit_interval, args.audit_exempt_namespace, args.audit_max_results)
        if args.kubeconfig and not os.path.isfile(args.kubeconfig):
            raise ValueError(f"--kubeconfig {args.kubeconfig}: no such file")
        if args.audit_native_policies and not args.audit:
            raise ValueError("--audit-native-policies needs the audit (--no-audit turns it off)")
        return cls(
            evaluator=evaluator,
            client=kube_client_config(args.kubeconfig, args.context),
            identity=args.identity,
            lease=LeaseConfig(name=args.lease_name,
                              namespace=args.lease_namespace or environ.get("POD_NAMESPACE") or "default")
            if args.leader_elect else None,
            reconcile=Settings(replan_timeout=timedelta(seconds=args.replan_timeout), replan_limit=args.replan_limit,
                               public_domain_template=args.public_domain_template),
            runner=RunnerConfig(workers=args.workers, resync_interval=args.resync_interval),
            writes_status=writes_status,
            audit=audit if args.audit else None,
            policies=PolicySource(Path(args.policies) if args.policies else None, tuple(args.policy_actions)),
            metrics_port=args.metrics_port,
            audit_native_policies=args.audit_native_policies,
            native_policies=args.native_policies,
            native_policies_owner=args.native_policies_owner,
            native_probe_namespace=args.lease_namespace or environ.get("POD_NAMESPACE") or "default",
        )


def audited_kinds() -> tuple[kinds.Kind, ...]:
    """The kinds the webhook judges (its configurations' rules), one version of each: the newest
    the bundled CRDs serve."""
    newest: dict[tuple[str, str], kinds.Kind] = {}
    for kind in bundled.served_kinds():  # newest first
        newest.setdefault((kind.group, kind.kind), kind)
    return tuple(newest.values())


def controller_watches(controller_kinds: tuple[kinds.Kind, ...], audit: bool, policies=None,
                       native_params: frozenset[tuple[str, str]] | None = None,
                       discovered: Mapping[tuple[str, str], kinds.Kind] | None = None) -> tuple[WatchedKind, ...]:
    """The watch cache's kinds: the controller's, and with the audit the kinds it judges, what the
    policies read (``policies``, a ``PolicySet``; None: every kind a policy may look up) and the
    controller's own reports; with the audit of native policies (``native_params`` not None: the
    param kinds they name, a custom resource's as ``discovered``) the cluster's
    ValidatingAdmissionPolicies, bindings and params; one watch per group and kind."""
    if not audit:
        return watches.controller_watches(controller_kinds)
    report_watches = [WatchedKind(k.api_version, k.kind, k.plural, label_selector=report_writes.SELECTOR)
                      for api in report_writes.REPORT_APIS for k in api.kinds]
    native = watches.native_policy_watches(native_params, discovered) if native_params is not None else ()
    return watches.controller_watches(controller_kinds, audited_kinds(), report_watches, policies, native)


def _background_audit(state, api: KubeApi, policies, settings: AuditSettings, metrics: ControllerMetrics,
                      elector) -> BackgroundAudit:
    return BackgroundAudit(
        state, api, policies,
        # the policies alone: the objects are as the apiserver stored them (its schema applied)
        auditor_for=lambda policy_set: Auditor(None, policy_set, state).audit,
        build_report=build_report, kinds=audited_kinds(), settings=settings, metrics=metrics,
        leading=(lambda: True) if elector is None else (lambda: elector.leading),
    )


async def _serve(config: ControllerConfig, api_client, policies=None) -> int:
    """``policies``: the audit's and the generated native policies' (None: neither)."""
    identity = config.identity or f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}"
    api = KubeApi(api_client, timeout=10)
    served = await asyncio.to_thread(served_kinds, api)
    writes_status = config.writes_status
    # what the reconcilers of the served kinds whose status it writes read (an owned kind whose
    # status is not written is not watched either)
    read = reads_of(k for k in writes_status if k in served)
    watched = tuple(k for k in served if k in read)

    native: ClusterNativePolicies | None = None

    def watch_list(policy_set=None):
        params = None if not audit_native else native.param_kinds if native is not None else frozenset()
        discovered = native.read.discovered if native is not None else None
        return controller_watches(watched, config.audit is not None and policies is not None, policy_set, params,
                                  discovered)

    audit_native = policies is not None and config.audit_native_policies
    state = KubeState(api_client, watch_list(policies.current() if policies is not None else None))
    if policies is not None:  # a reload's watch list is in force before its policies are
        policies.on_load.append(lambda fresh: state.set_kinds(watch_list(fresh)))
    if audit_native:  # the cluster's own policies beside the AdmissionPolicies; their params watched
        # a param kind of a custom resource: its plural and scope as discovery serves them
        native = ClusterNativePolicies(policies, state, config.evaluator, discover=api.served_kind)
        native.on_params.append(lambda _params: state.set_kinds(watch_list(policies.current())))
    elector = None
    if config.lease is not None:
        elector = LeaderElector(api, identity, config.lease)
    metrics = ControllerMetrics()
    controller = Controller(
        state, api, evaluator=config.evaluator, metrics=metrics, settings=config.reconcile, config=config.runner,
        elector=elector, recorder=EventRecorder(api, identity), writes_status=writes_status,
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    health = None
    if config.metrics_port:
        health = web.AppRunner(health_app(metrics, lambda: state.ready))
        await health.setup()
        await web.TCPSite(health, port=config.metrics_port).start()
    audit = None if policies is None or config.audit is None else \
        _background_audit(state, api, native or policies, config.audit, metrics, elector)
    generated = None
    if config.native_policies:
        from webhook.controller.native_policies import NativePolicies
        from webhook.policy.native_export import kind_resources

        generated = NativePolicies(api, policies, kind_resources(bundled.known_kinds()),
                                   owner=config.native_policies_owner, namespace=config.native_probe_namespace,
                                   poll=audit is None,  # (else the audit polls the policies)
                                   leading=(lambda: True) if elector is None else (lambda: elector.leading))
    state.start()
    try:
        log.info("controller %s started (leader election %s, background audit %s, generated native policies %s)",
                 identity, "on" if elector else "off",
                 ("on, with the cluster's ValidatingAdmissionPolicies" if native else "on") if audit else "off",
                 "on" if generated else "off")
        await asyncio.gather(controller.run(stop), *(loop_.run(stop) for loop_ in (audit, generated) if loop_))
    finally:
        await asyncio.to_thread(state.stop)
        if health is not None:
            await health.cleanup()
    log.info("controller %s stopped", identity)
    return 0


def _policies(source: PolicySource, evaluator: Evaluator):
    """The audit's policies, loaded now (a flag naming a missing or broken directory fails at
    start) and reloaded by the audit when their files change; type-checked against the shipped
    CRDs (the cluster's change)."""
    directory = source.path
    if not directory.is_dir():
        raise ValueError(f"--policies {directory}: no such directory")
    try:  # ActionsError: a ValueError in one line
        policies = load_policy_directory(source, evaluator)
    except PolicyLoadError as exc:
        first, *rest = [line for line in str(exc).splitlines() if line.strip()] or ["does not load"]
        more = f" (and {len(rest)} more lines)" if rest else ""
        raise ValueError(f"--policies {directory}: {first.strip()}{more}") from None
    return policies


def run(args: argparse.Namespace) -> int:
    logs.configure(args.log_level)
    try:
        config = ControllerConfig.from_flags(args, args.evaluator)
    except ValueError as exc:
        return command_line.error(f"controller: {exc}")
    policies = None
    if config.audit is not None or config.native_policies:
        try:
            policies = _policies(config.policies, config.evaluator)
        except ValueError as exc:
            return command_line.error(f"controller: {exc}")
    try:
        api_client = kube_api_client(config.client)
    except KubeConfigError as exc:
        return command_line.error(f"controller: cannot load Kubernetes configuration: {exc}")
    try:
        return asyncio.run(_serve(config, api_client, policies))
    except ApiError as exc:  # the API server unreachable or refusing discovery at start
        return command_line.error(f"controller: cannot reach the Kubernetes API: {exc}")
