"""Prometheus metrics of the webhook (one registry per server, so tests stay independent)."""

from __future__ import annotations

import bisect
import time
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.metrics_core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.samples import Sample
from prometheus_client.utils import floatToGoString

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
        self.answered = AnsweredReviews()
        self.registry.register(self.answered)
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
        self.answered.add(endpoint, kind, operation, allowed, seconds)

    def certificate_served(self, bundle: CertBundle, reloaded: bool) -> None:
        for name, when in expiry(bundle).items():
            self.cert_expiry.labels(name).set(when.timestamp())
        if reloaded:
            self.cert_reloads.inc()

    def render(self) -> bytes:
        return generate_latest(self.registry)


class AnsweredReviews:
    """The per-review metrics: reviews answered (a counter by endpoint, kind, operation and
    verdict) and their duration (a histogram by endpoint and kind), kept as plain numbers
    and turned into Prometheus samples when scraped (a custom collector).

    prometheus-client's own Counter and Histogram take a lock and walk the buckets in
    Python on every call; here a review is
    two dict lookups, a bisect and three additions. Only the event loop adds (reviews are
    answered there), so no lock is needed. The exposition is the same as theirs, the
    ``_created`` samples included. Label sets are bounded by the kind labels."""

    REVIEWS = "infergate_admission_reviews"
    DURATION = "infergate_admission_review_duration_seconds"

    def __init__(self, buckets: tuple[float, ...] = DURATION_BUCKETS):
        self.bounds = (*buckets, float("inf"))
        self._counts: dict[tuple[str, str, str, bool], list[float]] = {}  # key -> [count, created]
        self._durations: dict[tuple[str, str], list[float]] = {}  # key -> [per bucket..., sum, created]

    def add(self, endpoint: str, kind: str, operation: str, allowed: bool, seconds: float) -> None:
        count = self._counts.get((endpoint, kind, operation, allowed))
        if count is None:
            count = self._counts[(endpoint, kind, operation, allowed)] = [0, time.time()]
        count[0] += 1
        duration = self._durations.get((endpoint, kind))
        if duration is None:
            duration = self._durations[(endpoint, kind)] = [0] * len(self.bounds) + [0.0, time.time()]
        duration[bisect.bisect_left(self.bounds, seconds)] += 1
        duration[-2] += seconds

    def describe(self) -> list[Metric]:
        return [self._reviews_family(), self._duration_family()]

    def collect(self) -> Iterator[Metric]:
        reviews = self._reviews_family()
        for (endpoint, kind, operation, allowed), (count, created) in list(self._counts.items()):
            reviews.add_metric([endpoint, kind, operation, "allowed" if allowed else "denied"], count, created=created)
        yield reviews
        duration = self._duration_family()
        for (endpoint, kind), values in list(self._durations.items()):
            *per_bucket, total, created = values
            cumulative, buckets = 0, []
            for bound, n in zip(self.bounds, per_bucket):
                cumulative += n
                buckets.append((floatToGoString(bound), cumulative))
            duration.add_metric([endpoint, kind], buckets, total)
            duration.samples.append(Sample(self.DURATION + "_created", {"endpoint": endpoint, "kind": kind}, created))
        yield duration

    def _reviews_family(self) -> CounterMetricFamily:
        return CounterMetricFamily(self.REVIEWS, "AdmissionReviews answered, by endpoint, kind, operation and verdict "
                                                 "(allowed/denied).", labels=["endpoint", "kind", "operation", "verdict"])

    def _duration_family(self) -> HistogramMetricFamily:
        return HistogramMetricFamily(self.DURATION, "Time from receiving an AdmissionReview to answering it.",
                                     labels=["endpoint", "kind"])
