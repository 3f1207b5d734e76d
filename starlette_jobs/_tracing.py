"""The only module that imports OpenTelemetry: the send and process spans, and the correlation id.

At enqueue, a PRODUCER span `send {queue}` is started and its context (W3C traceparent,
tracestate, baggage) is stored with the job, together with the enqueuing request's correlation
id. In the worker, that context is attached again, so baggage is readable inside the job, and a
CONSUMER span `process {queue}` is started as its child and with a link to it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.trace import (
    Link,
    NoOpTracerProvider,
    ProxyTracerProvider,
    SpanKind,
    Status,
    StatusCode,
)

from ._correlation import correlation_id, correlation_scope
from ._trace_ids import CORRELATION_ID_KEY
from ._version import __version__

MESSAGING_SYSTEM = "starlette_jobs"


class Tracing:
    """Spans for one `Jobs` instance (its own tracer provider, or the global one)."""

    def __init__(self, tracer_provider: trace.TracerProvider | None = None) -> None:
        self._provider = tracer_provider
        self._tracer = trace.get_tracer(
            "starlette_jobs", __version__, tracer_provider=tracer_provider
        )

    def recording(self) -> bool:
        """Whether spans are recorded (an SDK's tracer provider is in use): without one, an
        enqueue only stores the current context (`stored_context`), with no span to open."""
        return self._sdk_installed()

    def _sdk_installed(self) -> bool:
        """Whether a real tracer provider is in use. Without one, the API's tracer makes no span
        of its own (it hands back the current one), so building attributes and entering its
        context managers would cost time per job for nothing. Asked per call: the global
        provider may be set after this `Jobs` was created."""
        # Exact types: isinstance against these ABCs costs more than the rest of this together.
        provider = self._provider
        if provider is None or type(provider) is ProxyTracerProvider:
            if not _PROVIDER_FROM_ENVIRONMENT and getattr(trace, "_TRACER_PROVIDER", False) is None:
                # None set, the usual case (as `_global_tracer_provider` tells, without its
                # call: an attempt asks once).
                return False
            provider = _global_tracer_provider()
        return (
            type(provider) is not ProxyTracerProvider and type(provider) is not NoOpTracerProvider
        )

    def send(self, queue: str, job_name: str) -> AbstractContextManager[SendScope]:
        """A PRODUCER span around the insert; the scope carries what is stored with the job."""
        if not self._sdk_installed():
            # What the no-op tracer's span would carry: the current context as it is.
            # Nothing records: the span is only there to be handed the job ids, in vain.
            return nullcontext(SendScope(trace.INVALID_SPAN, _stored_carrier()))
        return self._send_span(queue, job_name)

    @contextmanager
    def _send_span(self, queue: str, job_name: str) -> Iterator[SendScope]:
        with self._tracer.start_as_current_span(
            f"send {queue}",
            kind=SpanKind.PRODUCER,
            attributes={
                "messaging.system": MESSAGING_SYSTEM,
                "messaging.operation.name": "send",
                "messaging.operation.type": "send",
                "messaging.destination.name": queue,
                "starlette_jobs.job.name": job_name,
            },
        ) as span:
            yield SendScope(span, _stored_carrier())

    def process(
        self, queue: str, job_name: str, job_id: int, attempt: int, stored_context: str | None
    ) -> AbstractContextManager[ProcessScope]:
        """Restores the enqueuer's context and runs the block in a CONSUMER span."""
        if not stored_context and correlation_id() is None and not self._sdk_installed():
            # Nothing to restore and nothing records: the current context is already the one
            # the job would see. One shared scope, which looks up the current span only if the
            # attempt fails: a scope and a nullcontext per job cost 0.4 us for nothing.
            return _UNTRACED
        return self._process_span(queue, job_name, job_id, attempt, stored_context)

    @contextmanager
    def _process_span(
        self, queue: str, job_name: str, job_id: int, attempt: int, stored_context: str | None
    ) -> Iterator[ProcessScope]:
        carrier = _parse_carrier(stored_context)
        parent = propagate.extract(carrier)
        if not self._sdk_installed():
            # The no-op tracer would make the extracted parent the current span: attach it, so
            # baggage and the correlation id still reach the job.
            token = otel_context.attach(parent)
            try:
                with correlation_scope(carrier.get(CORRELATION_ID_KEY)):
                    yield ProcessScope(trace.get_current_span(parent))
            finally:
                otel_context.detach(token)
            return
        parent_span_context = trace.get_current_span(parent).get_span_context()
        links = [Link(parent_span_context)] if parent_span_context.is_valid else []
        token = otel_context.attach(parent)
        try:
            with (
                correlation_scope(carrier.get(CORRELATION_ID_KEY)),
                self._tracer.start_as_current_span(
                    f"process {queue}",
                    kind=SpanKind.CONSUMER,
                    links=links,
                    attributes={
                        "messaging.system": MESSAGING_SYSTEM,
                        "messaging.operation.name": "process",
                        "messaging.operation.type": "process",
                        "messaging.destination.name": queue,
                        "messaging.message.id": str(job_id),
                        "starlette_jobs.job.name": job_name,
                        "starlette_jobs.attempt": attempt,
                    },
                    # The worker records the failure itself, with the attempt's outcome.
                    record_exception=False,
                    set_status_on_exception=False,
                ) as span,
            ):
                yield ProcessScope(span)
        finally:
            otel_context.detach(token)


class SendScope:
    """What the send span hands to the insert: the context to store, and where to put the id."""

    def __init__(self, span: trace.Span, stored_context: str | None) -> None:
        self._span = span
        self.stored_context = stored_context

    def set_job_ids(self, job_ids: list[int]) -> None:
        if len(job_ids) == 1:
            self._span.set_attribute("messaging.message.id", str(job_ids[0]))
        else:
            self._span.set_attribute("messaging.batch.message_count", len(job_ids))


class ProcessScope:
    """The process span of one attempt, as the worker sees it."""

    def __init__(self, span: trace.Span) -> None:
        self._span = span

    def failed(self, error: BaseException) -> None:
        """Marks the span as failed with the exception's type."""
        _failed(self._span, error)


def _failed(span: trace.Span, error: BaseException) -> None:
    if not span.is_recording():
        return
    span.record_exception(error)
    span.set_attribute("error.type", type(error).__qualname__)
    span.set_status(Status(StatusCode.ERROR, f"{type(error).__qualname__}: {error}"))


class _CurrentSpanScope(ProcessScope):
    """The scope of an attempt that opens no span: its span is the current one, looked up when
    the attempt fails (within the block, so in the context the block began with)."""

    def __init__(self) -> None:
        pass

    def failed(self, error: BaseException) -> None:
        _failed(trace.get_current_span(), error)


class _Untraced(AbstractContextManager[ProcessScope]):
    """`nullcontext(_CurrentSpanScope())`, one for every untraced attempt."""

    __slots__ = ()

    def __enter__(self) -> ProcessScope:
        return _CURRENT_SPAN_SCOPE

    def __exit__(self, *exc_info: object) -> None:
        return None


_CURRENT_SPAN_SCOPE = _CurrentSpanScope()
_UNTRACED = _Untraced()


# Read once: OpenTelemetry loads a provider named by this variable on first use.
_PROVIDER_FROM_ENVIRONMENT = "OTEL_PYTHON_TRACER_PROVIDER" in os.environ


def _global_tracer_provider() -> trace.TracerProvider:
    """`trace.get_tracer_provider()`, minus its look-up of the environment on every call while
    no provider is set (an exception raised and caught inside os.environ, per job). It reads
    the API's module global when there is one, and falls back to the public call otherwise."""
    if not _PROVIDER_FROM_ENVIRONMENT and getattr(trace, "_TRACER_PROVIDER", False) is None:
        return _PROXY
    return trace.get_tracer_provider()


_PROXY = ProxyTracerProvider()


def stored_context() -> str | None:
    """What an enqueue stores of the current context, as JSON (None: nothing to store)."""
    return _stored_carrier()


def _stored_carrier() -> str | None:
    """The current context (traceparent, tracestate, baggage) and correlation id, as JSON."""
    carrier: dict[str, str] = {}
    # Propagators write out what the context holds: an empty one (no span, no baggage, as
    # outside a traced request) leaves nothing for them to do, and they cost a third of a
    # traceless enqueue's own time.
    if otel_context.get_current():
        propagate.inject(carrier)
    request_id = correlation_id()
    if request_id is not None:
        carrier[CORRELATION_ID_KEY] = request_id
    return json.dumps(carrier) if carrier else None


def _parse_carrier(stored_context: str | None) -> dict[str, str]:
    """The stored carrier; anything malformed yields an empty one, and so a fresh trace."""
    if not stored_context:
        return {}
    try:
        loaded: Any = json.loads(stored_context)
    except ValueError:
        return {}
    if not isinstance(loaded, dict):
        return {}
    return {str(k): v for k, v in loaded.items() if isinstance(v, str)}
