"""The controller's health and Prometheus metrics over plain HTTP (``--metrics-port``).

``/healthz``: the process runs; ``/readyz``: the cluster view has synced; ``/metrics``:
reconciles, status writes, conflicts and failures by kind, queue depth, leadership; the
background audit's results by policy and result, its scans (duration, objects, last scan time)
and report writes.
"""

from __future__ import annotations

from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST


class ControllerMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.reconciles = Counter("infergate_controller_reconciles", "Objects reconciled, by kind.",
                                  ["kind"], registry=self.registry)
        self.writes = Counter("infergate_controller_status_writes", "Statuses written (changed), by kind.",
                              ["kind"], registry=self.registry)
        self.conflicts = Counter("infergate_controller_conflicts",
                                 "Status writes refused with 409 Conflict (re-read and retried), by kind.",
                                 ["kind"], registry=self.registry)
        self.failures = Counter("infergate_controller_failures",
                                "Reconciles that failed and were queued again with backoff, by kind.",
                                ["kind"], registry=self.registry)
        self.queue_depth = Gauge("infergate_controller_queue_depth", "Keys waiting in the work queue.",
                                 registry=self.registry)
        self.leader = Gauge("infergate_controller_leader", "1 while this replica holds the Lease.",
                            registry=self.registry)
        # the background audit (webhook.controller.background_audit)
        self.audit_results = Gauge("infergate_audit_results",
                                   "Results of the last audit of every existing object, by policy and result "
                                   "(pass, fail, warn, error).", ["policy", "result"], registry=self.registry)
        self.audit_scan_seconds = Histogram("infergate_audit_scan_duration_seconds",
                                            "Duration of a full audit scan of every existing object.",
                                            buckets=(0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300),
                                            registry=self.registry)
        self.audit_objects = Gauge("infergate_audit_objects_scanned",
                                   "Objects judged by the last full audit scan.", registry=self.registry)
        self.audit_last_scan = Gauge("infergate_audit_last_scan_timestamp_seconds",
                                     "When the last full audit scan ended (Unix time).", registry=self.registry)
        self.audit_writes = Counter("infergate_audit_report_writes",
                                    "Reports created, updated or deleted (changed), by kind and verb.",
                                    ["kind", "verb"], registry=self.registry)
        self.audit_failures = Counter("infergate_audit_failures",
                                      "Objects whose audit or report write failed (retried at the next scan).",
                                      registry=self.registry)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


def health_app(metrics: ControllerMetrics, ready) -> web.Application:
    """``ready``: a callable telling whether the cluster view has synced."""

    async def healthz(request: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    async def readyz(request: web.Request) -> web.Response:
        if ready():
            return web.Response(text="ok\n")
        return web.Response(status=503, text="the cluster view has not synced yet\n")

    async def exposition(request: web.Request) -> web.Response:
        response = web.Response(body=metrics.exposition())
        response.headers["Content-Type"] = CONTENT_TYPE_LATEST
        return response

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", exposition)
    return app
