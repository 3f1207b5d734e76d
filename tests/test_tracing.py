"""The send and process spans (`_tracing.Tracing`), driven directly: what is stored with a job,
what a job sees again when it runs, and the spans with a real SDK provider. One trace from an
HTTP request through a worker is in integration/test_tracing.py."""

from __future__ import annotations

import json

import pytest
from opentelemetry import baggage, trace
from opentelemetry import context as otel_context
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import NoOpTracerProvider, SpanKind, StatusCode

from starlette_jobs import correlation_id
from starlette_jobs._correlation import correlation_scope
from starlette_jobs._tracing import Tracing
from starlette_jobs._version import __version__


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def traced(exporter: InMemorySpanExporter) -> Tracing:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return Tracing(provider)


def test_without_a_trace_or_request_nothing_is_stored() -> None:
    with Tracing().send("default", "app.job") as scope:
        scope.set_job_ids([1])  # harmless without a span
    assert scope.stored_context is None


def test_the_enqueuing_requests_correlation_id_is_stored() -> None:
    with correlation_scope("req-1"), Tracing(NoOpTracerProvider()).send("q", "app.job") as scope:
        pass
    assert scope.stored_context is not None
    assert json.loads(scope.stored_context) == {"x-request-id": "req-1"}


def test_baggage_is_stored_and_seen_again_by_the_job_with_the_correlation_id() -> None:
    token = otel_context.attach(baggage.set_baggage("tenant", "acme"))
    try:
        with correlation_scope("req-2"), Tracing().send("q", "app.job") as scope:
            pass
    finally:
        otel_context.detach(token)
    assert scope.stored_context is not None
    assert "baggage" in json.loads(scope.stored_context)
    assert baggage.get_baggage("tenant") is None
    with Tracing().process("q", "app.job", 1, 1, scope.stored_context):
        assert baggage.get_baggage("tenant") == "acme"
        assert correlation_id() == "req-2"
    assert correlation_id() is None
    assert baggage.get_baggage("tenant") is None


@pytest.mark.parametrize("stored", ["not json", "[1, 2]", '"text"', '{"x-request-id": 5}', ""])
def test_a_malformed_stored_context_runs_the_job_with_a_fresh_one(stored: str) -> None:
    with Tracing().process("q", "app.job", 1, 1, stored) as scope:
        assert correlation_id() is None
        assert not trace.get_current_span().get_span_context().is_valid
        scope.failed(ValueError("no span records this"))


def test_with_a_provider_the_send_span_is_a_producer_carrying_the_job_id(
    traced: Tracing, exporter: InMemorySpanExporter
) -> None:
    with traced.send("emails", "app.send_welcome") as scope:
        scope.set_job_ids([42])
    [span] = exporter.get_finished_spans()
    assert (span.name, span.kind) == ("send emails", SpanKind.PRODUCER)
    assert span.attributes is not None
    assert dict(span.attributes) == {
        "messaging.system": "starlette_jobs",
        "messaging.operation.name": "send",
        "messaging.operation.type": "send",
        "messaging.destination.name": "emails",
        "starlette_jobs.job.name": "app.send_welcome",
        "messaging.message.id": "42",
    }
    assert span.instrumentation_scope is not None
    assert (span.instrumentation_scope.name, span.instrumentation_scope.version) == (
        "starlette_jobs",
        __version__,
    )
    assert scope.stored_context is not None
    assert "traceparent" in json.loads(scope.stored_context)


def test_a_batch_send_span_counts_the_jobs(traced: Tracing, exporter: InMemorySpanExporter) -> None:
    with traced.send("emails", "app.send_welcome") as scope:
        scope.set_job_ids([1, 2, 3])
    [span] = exporter.get_finished_spans()
    assert span.attributes is not None
    assert span.attributes["messaging.batch.message_count"] == 3
    assert "messaging.message.id" not in span.attributes


def test_the_process_span_is_a_child_of_the_send_span_and_linked_to_it(
    traced: Tracing, exporter: InMemorySpanExporter
) -> None:
    with traced.send("emails", "app.send_welcome") as sent:
        pass
    with traced.process("emails", "app.send_welcome", 42, 2, sent.stored_context):
        pass
    send, process = exporter.get_finished_spans()
    assert (process.name, process.kind) == ("process emails", SpanKind.CONSUMER)
    assert send.context is not None
    assert process.context is not None
    assert process.context.trace_id == send.context.trace_id
    assert process.parent is not None
    assert process.parent.span_id == send.context.span_id
    assert [link.context.span_id for link in process.links] == [send.context.span_id]
    assert process.attributes is not None
    assert process.attributes["messaging.message.id"] == "42"
    assert process.attributes["starlette_jobs.attempt"] == 2


def test_a_process_span_without_a_stored_context_starts_a_trace_with_no_link(
    traced: Tracing, exporter: InMemorySpanExporter
) -> None:
    with traced.process("q", "app.job", 1, 1, None):
        pass
    [span] = exporter.get_finished_spans()
    assert span.parent is None
    assert list(span.links) == []


def test_a_failed_attempt_marks_its_span_with_the_error_type(
    traced: Tracing, exporter: InMemorySpanExporter
) -> None:
    with traced.process("q", "app.job", 1, 1, None) as scope:
        scope.failed(LookupError("nothing here"))
    [span] = exporter.get_finished_spans()
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description == "LookupError: nothing here"
    assert span.attributes is not None
    assert span.attributes["error.type"] == "LookupError"
    assert [event.name for event in span.events] == ["exception"]


def test_an_exception_leaving_the_block_is_left_for_the_worker_to_record(
    traced: Tracing, exporter: InMemorySpanExporter
) -> None:
    with pytest.raises(KeyError), traced.process("q", "app.job", 1, 1, None):
        raise KeyError("x")
    [span] = exporter.get_finished_spans()
    assert span.status.status_code is StatusCode.UNSET
    assert list(span.events) == []
