"""Prometheus metrics of the webhook (one registry per server, so tests stay independent)."""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from webhook.certs import CertBundle, expiry

# Admission is sub-millisecond when healthy; the tail buckets show trouble near the timeout.
DURATION_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


# Kinds come from the request: any client reaching the port could otherwise grow the label
# sets (and the memory) without bound. The served kinds are a handful.
MAX_KIND_LABELS = 32


class Metrics:
    content_type = CONTENT_TYPE_LATEST

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self._kinds: set[str] = set()
        # (endpoint, kind, operation, allowed) -> (counter child, histogram child): labels()
        # validates and locks on every call, ~5 us each; bounded like the kinds.
        self._answered: dict[tuple[str, str, str, bool], tuple[Any, Any]] = {}
        self.reviews = Counter(
            "infergate_admission_reviews",
            "AdmissionReviews answered, by endpoint, kind, operation and verdict (allowed/denied).",
            ["endpoint", "kind", "operation", "verdict"],
            registry=self.registry,
        )
        self.duration = Histogram(
            "infergate_admission_review_duration_seconds",
            "Time from receiving an AdmissionReview to answering it.",
            ["endpoint", "kind"],
            buckets=DURATION_BUCKETS,
            registry=self.registry,
        )
        self.policy_errors = Counter(
            "infergate_admission_errors",
            "Reviews the admission chain could not judge (not ready, internal error or timeout); answered by the failure mode.",
            ["endpoint", "kind", "reason"],
            registry=self.registry,
        )
        self.bad_requests = Counter(
            "infergate_http_rejected",
            "HTTP requests rejected before admission (malformed review, wrong content type, too large).",
            ["reason"],
            registry=self.registry,
        )
        self.cert_expiry = Gauge(
            "infergate_certificate_expiry_timestamp_seconds",
            "When the serving certificate and the earliest CA in the bundle expire (Unix time).",
            ["certificate"],
            registry=self.registry,
        )
        self.cert_reloads = Counter(
            "infergate_certificate_reloads",
            "Serving certificates loaded into the live TLS context after the first.",
            registry=self.registry,
        )

    def kind_label(self, kind: str) -> str:
        """``kind`` as a label value: the first MAX_KIND_LABELS kinds seen, then "other"."""
        if kind not in self._kinds:
            if len(self._kinds) >= MAX_KIND_LABELS:
                return "other"
            self._kinds.add(kind)
        return kind

    def review_answered(self, endpoint: str, kind: str, operation: str, allowed: bool, seconds: float) -> None:
        """Count an answered review and observe its duration (``kind`` from :meth:`kind_label`)."""
        key = (endpoint, kind, operation, allowed)
        children = self._answered.get(key)
        if children is None:
            children = self._answered[key] = (
                self.reviews.labels(endpoint, kind, operation, "allowed" if allowed else "denied"),
                self.duration.labels(endpoint, kind),
            )
        children[0].inc()
        children[1].observe(seconds)

    def certificate_served(self, bundle: CertBundle, reloaded: bool) -> None:
        for name, when in expiry(bundle).items():
            self.cert_expiry.labels(name).set(when.timestamp())
        if reloaded:
            self.cert_reloads.inc()

    def render(self) -> bytes:
        return generate_latest(self.registry)
