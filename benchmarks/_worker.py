"""A worker process for throughput.py: `python _worker.py sj|raw DSN CONCURRENCY`.

Runs until SIGTERM. The job is a no-op that, when given `t0`, appends "t0 start" to the file
named by $BENCH_LATENCY_FILE (for the latency phase). With $BENCH_OTEL_SDK=1, starlette-jobs
runs with the OpenTelemetry SDK and a batch span processor feeding an exporter that drops
every span: the cost of recording spans, without the cost of any particular backend.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
import time
from collections.abc import Sequence
from typing import IO, Any

from starlette_jobs import Jobs, Retry, job

_latency_file: IO[str] | None = None


def record_start(t0: float | None) -> None:
    global _latency_file
    if t0 is None:
        return
    if _latency_file is None:
        _latency_file = open(os.environ["BENCH_LATENCY_FILE"], "a", buffering=1)  # noqa: SIM115
    _latency_file.write(f"{t0} {time.time()}\n")


@job(name="benchmarks.noop", retry=Retry.none())
async def noop(n: int, t0: float | None = None) -> None:
    record_start(t0)


async def raw_noop(n: int, t0: float | None = None) -> None:
    record_start(t0)


def sdk_tracer_provider() -> Any:
    """An SDK tracer provider whose spans are batched and then dropped."""
    from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
    from opentelemetry.sdk.trace.export import (
        BatchSpanProcessor,
        SpanExporter,
        SpanExportResult,
    )

    class DropSpans(SpanExporter):
        def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(DropSpans()))
    return provider


async def main(kind: str, dsn: str, concurrency: int) -> None:
    logging.basicConfig(level=logging.WARNING)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    loop.add_signal_handler(signal.SIGINT, stop.set)
    if kind == "raw":
        import _reference

        await _reference.run_worker(dsn, concurrency, raw_noop, stop)
        return
    provider = sdk_tracer_provider() if os.environ.get("BENCH_OTEL_SDK") == "1" else None
    async with Jobs(dsn, queues={"default": concurrency}, tracer_provider=provider):
        await stop.wait()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
