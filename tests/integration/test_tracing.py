"""One trace from the HTTP request through the enqueue to the job, with baggage and request id."""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry import baggage, trace
from opentelemetry.instrumentation.starlette import StarletteInstrumentor
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from starlette_jobs import CorrelationIdMiddleware, Jobs, Retry, correlation_id, job
from tests.conftest import on_postgres

seen_in_job: dict[str, Any] = {}


@job(retry=Retry.none())
async def traced(n: int) -> None:
    seen_in_job["baggage"] = baggage.get_baggage("tenant")
    seen_in_job["request_id"] = correlation_id()
    seen_in_job["span"] = trace.get_current_span().get_span_context()


@job(retry=Retry.none())
async def traced_failure() -> None:
    raise LookupError("nothing here")


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def provider(exporter: InMemorySpanExporter) -> TracerProvider:
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    return tracer_provider


def make_app(jobs: Jobs, provider: TracerProvider) -> Starlette:
    async def enqueue(request: Request) -> JSONResponse:
        job_id = await traced.enqueue(n=1)
        return JSONResponse({"job_id": job_id}, status_code=202)

    app = Starlette(
        routes=[Route("/enqueue", enqueue, methods=["POST"])],
        middleware=[Middleware(CorrelationIdMiddleware)],
        lifespan=jobs.lifespan,
    )
    StarletteInstrumentor.instrument_app(app, tracer_provider=provider)
    return app


def by_name(spans: tuple[ReadableSpan, ...], name: str) -> ReadableSpan:
    [span] = [s for s in spans if s.name == name]
    return span


def test_request_send_and_process_spans_share_one_trace(
    database_dsn: str, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    seen_in_job.clear()
    jobs = Jobs(database_dsn, tracer_provider=provider, poll_interval=0.2)
    with TestClient(make_app(jobs, provider)) as client:
        response = client.post(
            "/enqueue", headers={"baggage": "tenant=acme", "x-request-id": "req-42"}
        )
        assert response.status_code == 202
        assert response.headers["x-request-id"] == "req-42"
        client.portal.call(jobs.drain)  # type: ignore[union-attr]

    spans = exporter.get_finished_spans()
    server = by_name(spans, "POST /enqueue")
    send = by_name(spans, "send default")
    process = by_name(spans, "process default")
    assert server.kind == SpanKind.SERVER
    assert send.kind == SpanKind.PRODUCER
    assert process.kind == SpanKind.CONSUMER
    trace_ids = {s.context.trace_id for s in (server, send, process) if s.context}
    assert len(trace_ids) == 1
    assert send.parent is not None
    assert server.context is not None
    assert send.parent.span_id == server.context.span_id
    assert process.parent is not None
    assert send.context is not None
    assert process.parent.span_id == send.context.span_id
    assert [link.context.span_id for link in process.links] == [send.context.span_id]

    job_id = str(response.json()["job_id"])
    assert send.attributes is not None
    assert process.attributes is not None
    assert send.attributes["messaging.message.id"] == job_id
    assert process.attributes["messaging.message.id"] == job_id
    assert process.attributes["messaging.system"] == "starlette_jobs"
    assert process.attributes["messaging.operation.type"] == "process"
    assert process.attributes["messaging.destination.name"] == "default"
    assert process.attributes["starlette_jobs.attempt"] == 1
    assert seen_in_job["baggage"] == "acme"
    assert seen_in_job["request_id"] == "req-42"
    assert process.context is not None
    assert seen_in_job["span"].span_id == process.context.span_id


async def test_a_failed_attempt_sets_error_status_and_type(
    database_dsn: str, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    async with Jobs(database_dsn, tracer_provider=provider, poll_interval=0.2) as jobs:
        await traced_failure.enqueue()
        await jobs.drain(timeout=10)
    process = by_name(exporter.get_finished_spans(), "process default")
    assert process.status.status_code == StatusCode.ERROR
    assert process.attributes is not None
    assert process.attributes["error.type"] == "LookupError"
    assert [event.name for event in process.events] == ["exception"]


async def test_a_malformed_stored_trace_context_runs_the_job_in_a_fresh_trace(
    database_dsn: str, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    seen_in_job.clear()
    async with Jobs(database_dsn, queues={}, tracer_provider=provider) as producer:
        job_id = await traced.enqueue(n=1)
        await on_postgres(producer).pool.execute(
            "UPDATE starlette_jobs SET trace_context = $1::jsonb WHERE id = $2",
            '{"traceparent": "00-zzzz-not-a-trace", "baggage": 5}',
            job_id,
        )
    async with Jobs(database_dsn, tracer_provider=provider, poll_interval=0.2) as jobs:
        await jobs.drain(timeout=10)
        record = await jobs.get(job_id)
    assert record is not None
    assert record.status == "succeeded"
    process = by_name(exporter.get_finished_spans(), "process default")
    assert process.parent is None
    assert process.links == ()


async def test_every_step_of_a_workflow_is_in_the_trace_that_enqueued_it(
    database_dsn: str, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    from starlette_jobs import Workflow

    async with Jobs(database_dsn, tracer_provider=provider, poll_interval=0.2) as jobs:
        flow = Workflow("traced")
        first = flow.add("first", traced, n=1)
        flow.after(first).add("second", traced, n=2)
        with provider.get_tracer("test").start_as_current_span("the caller") as caller:
            await flow.enqueue()
        await jobs.drain()
    spans = exporter.get_finished_spans()
    send = by_name(spans, "send default")
    assert send.attributes is not None
    assert send.attributes["starlette_jobs.job.name"] == "workflow:traced"
    processes = [s for s in spans if s.name == "process default"]
    assert len(processes) == 2
    for process in processes:
        assert process.parent is not None
        assert send.context is not None
        assert process.parent.span_id == send.context.span_id
        assert process.context is not None
        assert process.context.trace_id == caller.get_span_context().trace_id
