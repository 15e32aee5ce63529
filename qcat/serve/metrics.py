"""The service's Prometheus metrics, in a registry of its own (one per app)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, disable_created_metrics, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

CONTENT_TYPE = CONTENT_TYPE_LATEST
disable_created_metrics()  # no *_created series: they double the output and nobody graphs them
LATENCY_BUCKETS = (0.0005, 0.001, 0.002, 0.003, 0.005, 0.0075, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096)


class ServiceMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter("qcat_http_requests", "HTTP requests by route, method and status",
                                ["route", "method", "status"], registry=self.registry)
        self.latency = Histogram("qcat_http_request_duration_seconds", "time from request to response, by route",
                                 ["route"], buckets=LATENCY_BUCKETS, registry=self.registry)
        self.queries = Counter("qcat_queries_classified", "queries classified", registry=self.registry)
        self.query_errors = Counter("qcat_query_errors", "queries answered with a per-item error",
                                    registry=self.registry)
        self.model_calls = Histogram("qcat_model_call_queries", "queries per model call (micro-batches)",
                                     buckets=BATCH_BUCKETS, registry=self.registry)
        self.reloads = Counter("qcat_model_reloads", "model reloads by result (ok, refused)",
                               ["result"], registry=self.registry)
        self.model_info = Gauge("qcat_model_info", "the bundle being served (value 1)",
                                ["backend", "bundle_hash"], registry=self.registry)

    def serving(self, identity: dict, previous: dict | None = None) -> None:
        if previous is not None:
            self.model_info.remove(previous["backend"], previous["bundle_hash"])
        self.model_info.labels(identity["backend"], identity["bundle_hash"]).set(1)

    def render(self) -> bytes:
        return generate_latest(self.registry)
