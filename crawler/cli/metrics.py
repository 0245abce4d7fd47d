"""Prometheus metrics of a running crawl (``--metrics-port``), via prometheus-client.

Owns: the mapping of the engine's counters to metric families. Values are read from the
engine when Prometheus scrapes (a custom collector in the exporter's thread): nothing is
updated per page, so metrics cost nothing between scrapes.

Families: ``crawl_pages_total{outcome}`` (ok, failed, unchanged), ``crawl_responses_total
{status}``, ``crawl_errors_total{kind}``, ``crawl_skipped_total{reason}``,
``crawl_bytes_total``, ``crawl_retries_total``, ``crawl_queued``, ``crawl_backlog``
(queued in the store, not in memory), ``crawl_in_flight``, ``crawl_parse_busy``,
``crawl_parse_workers``, ``crawl_hosts``, ``crawl_elapsed_seconds``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

if TYPE_CHECKING:
    from crawler.engine.engine import Engine


class EngineCollector(Collector):
    """Reads one engine's counters at scrape time."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def collect(self) -> Iterator[Metric]:
        engine = self._engine
        counters = engine.counters
        progress = engine.progress()
        pages = CounterMetricFamily("crawl_pages", "URLs fetched and stored", labels=["outcome"])
        pages.add_metric(["ok"], counters.pages_ok)
        pages.add_metric(["failed"], counters.pages_failed)
        pages.add_metric(["unchanged"], counters.pages_unchanged)
        yield pages
        yield _labelled("crawl_responses", "Responses by HTTP status", "status", counters.by_status)
        yield _labelled(
            "crawl_errors", "Fetches without a usable response", "kind", counters.errors
        )
        yield _labelled("crawl_skipped", "URLs not fetched, by reason", "reason", counters.skipped)
        yield CounterMetricFamily("crawl_bytes", "Body bytes downloaded", value=counters.bytes)
        yield CounterMetricFamily("crawl_retries", "Requests retried", value=counters.retries)
        yield GaugeMetricFamily("crawl_queued", "URLs queued in memory", value=progress.queued)
        yield GaugeMetricFamily(
            "crawl_backlog", "URLs queued in the store only", value=engine.backlog
        )
        yield GaugeMetricFamily("crawl_in_flight", "Requests in flight", value=progress.in_flight)
        yield GaugeMetricFamily(
            "crawl_parse_busy", "Pages being parsed in the pool", value=progress.parse_busy
        )
        yield GaugeMetricFamily(
            "crawl_parse_workers", "Parse processes", value=engine.settings.parse_workers
        )
        yield GaugeMetricFamily("crawl_hosts", "Hosts known", value=engine.frontier.hosts)
        yield GaugeMetricFamily(
            "crawl_elapsed_seconds", "Seconds since the run started", value=progress.elapsed_s
        )


def _labelled(name: str, doc: str, label: str, values: Mapping[Any, int]) -> Metric:
    family = CounterMetricFamily(name, doc, labels=[label])
    for key, count in sorted(values.items(), key=lambda item: str(item[0])):
        family.add_metric([str(key)], count)
    return family


def serve_metrics(engine: Engine, port: int, host: str = "127.0.0.1") -> tuple[Any, Any]:
    """Start the exporter on ``host:port`` in a daemon thread; returns (server, thread) —
    call ``server.shutdown()`` to stop it. Raises ``OSError`` if the port is taken."""
    from prometheus_client import start_http_server

    registry = CollectorRegistry(auto_describe=False)
    registry.register(EngineCollector(engine))
    return start_http_server(port, addr=host, registry=registry)
