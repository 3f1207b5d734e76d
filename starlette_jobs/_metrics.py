"""The only module that records OpenTelemetry metrics (docs/metrics.md).

The messaging conventions' four (sent and consumed messages, the process and the client
operations' durations), and the library's own: retries, rescues, schedule ticks, and the gauges
of each queue. As with spans (`_tracing.py`), nothing is made or recorded while no SDK's meter
provider is in use: the callers ask `recording()` first, an exact-type check per call.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Iterable, Iterator
from typing import Any

from opentelemetry import metrics
from opentelemetry.metrics import (
    CallbackOptions,
    Counter,
    Histogram,
    MeterProvider,
    NoOpMeterProvider,
    Observation,
)
from opentelemetry.metrics import _internal as _api

from ._metric_records import QueueDepth
from ._tracing import MESSAGING_SYSTEM
from ._version import __version__

# The conventions' advised buckets for both durations, in seconds.
DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10)

SYSTEM = "messaging.system"
OPERATION = "messaging.operation.name"
OPERATION_TYPE = "messaging.operation.type"
QUEUE = "messaging.destination.name"
ERROR_TYPE = "error.type"
JOB_NAME = "starlette_jobs.job.name"
STATUS = "starlette_jobs.job.status"


class Metrics:
    """The instruments of one `Jobs` instance (its own meter provider, or the global one)."""

    def __init__(self, meter_provider: MeterProvider | None = None) -> None:
        self._provider = meter_provider
        self.depths: list[QueueDepth] = []
        """What this process reports of each queue: set by the one worker that reads them
        (`worker/_depths.py`), empty in every other."""
        with _REPORTING_LOCK:
            _REPORTING.add(self)

    def recording(self) -> bool:
        """Whether an SDK's meter provider is in use. Asked per call: the global provider may be
        set after this `Jobs` was created."""
        if (
            self._provider is None
            and not _PROVIDER_FROM_ENVIRONMENT
            and getattr(_api, "_METER_PROVIDER", False) is None
        ):
            # No provider at all, the usual case, told here: the worker asks for every
            # attempt, and the two calls of `provider()` cost as much as the rest.
            return False
        return self.provider() is not None

    def provider(self) -> MeterProvider | None:
        """The SDK's meter provider in use, None without one."""
        # Exact types: isinstance against these ABCs costs more than the rest of this together.
        provider = self._provider
        if provider is None or type(provider) is _PROXY_TYPE:
            provider = _global_meter_provider()
        if provider is None or type(provider) is _PROXY_TYPE or type(provider) is NoOpMeterProvider:
            return None
        return provider

    def instruments(self) -> Instruments:
        """The instruments of the provider in use; only once `recording()` said True."""
        provider = self.provider()
        assert provider is not None
        made = _INSTRUMENTS.get(provider)
        if made is None:
            made = _INSTRUMENTS[provider] = Instruments(provider)
        return made

    # -- what the enqueue path and the worker record -----------------------------------------

    def sent(
        self, queue: str, job_name: str, count: int, seconds: float, error: BaseException | None
    ) -> None:
        """`count` jobs written to `queue` in one enqueue that took `seconds`."""
        made = self.instruments()
        attributes = _operation("send", "send", queue)
        if error is not None:
            attributes[ERROR_TYPE] = type(error).__qualname__
        made.operation_duration.record(seconds, attributes)
        made.sent.add(count, {**attributes, JOB_NAME: job_name})

    def claimed(self, queue: str, count: int, seconds: float, error: BaseException | None) -> None:
        """One claim of `count` jobs from `queue` that took `seconds`."""
        made = self.instruments()
        attributes = _operation("receive", "receive", queue)
        if error is not None:
            attributes[ERROR_TYPE] = type(error).__qualname__
        made.operation_duration.record(seconds, attributes)
        if count:
            made.consumed.add(count, attributes)

    def settled(self, count: int, seconds: float, error: BaseException | None) -> None:
        """One write of `count` outcomes (any queues') that took `seconds`."""
        made = self.instruments()
        attributes: dict[str, str] = {
            SYSTEM: MESSAGING_SYSTEM,
            OPERATION: "settle",
            OPERATION_TYPE: "settle",
        }
        if error is not None:
            attributes[ERROR_TYPE] = type(error).__qualname__
        made.operation_duration.record(seconds, attributes)

    def processed(
        self, queue: str, job_name: str, seconds: float, outcome: str, error_type: str | None
    ) -> None:
        """One attempt; `outcome`: succeeded, retried, failed or cancelled; `error_type`: the
        class of the exception that failed it."""
        attributes = _operation("process", "process", queue)
        attributes[JOB_NAME] = job_name
        attributes["starlette_jobs.outcome"] = outcome
        if error_type is not None:
            attributes[ERROR_TYPE] = error_type
        made = self.instruments()
        made.process_duration.record(seconds, attributes)
        if outcome == "retried":
            made.retried.add(1, {QUEUE: queue, JOB_NAME: job_name, ERROR_TYPE: error_type or ""})

    def rescued(self, queue: str, status: str, reason: str) -> None:
        """A job given back (`status` pending) or failed by a rescue: `reason` is
        `lease_expired` or `worker_dead`."""
        self.instruments().rescued.add(
            1, {QUEUE: queue, STATUS: status, "starlette_jobs.reason": reason}
        )

    def tick(self, schedule: str, status: str, missed: bool) -> None:
        """A schedule's tick recorded as `status`; `missed`: due while no worker ran."""
        self.instruments().ticks.add(
            1,
            {
                "starlette_jobs.schedule.name": schedule,
                "starlette_jobs.tick.status": status,
                "starlette_jobs.tick.missed": missed,
            },
        )


class Instruments:
    """Every instrument, made once per meter provider: the SDK keeps the first instrument of a
    name, so a second `Jobs` on the same provider must share them (the gauges' callback
    included, which reads every `Metrics` of that provider)."""

    def __init__(self, provider: MeterProvider) -> None:
        meter = provider.get_meter("starlette_jobs", __version__)
        self.sent: Counter = meter.create_counter(
            "messaging.client.sent.messages",
            unit="{message}",
            description="Number of messages producer attempted to send to the broker.",
        )
        self.consumed: Counter = meter.create_counter(
            "messaging.client.consumed.messages",
            unit="{message}",
            description="Number of messages that were delivered to the application.",
        )
        self.operation_duration: Histogram = meter.create_histogram(
            "messaging.client.operation.duration",
            unit="s",
            description="Duration of messaging operation initiated by a producer or consumer "
            "client.",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
        )
        self.process_duration: Histogram = meter.create_histogram(
            "messaging.process.duration",
            unit="s",
            description="Duration of processing operation.",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
        )
        self.retried: Counter = meter.create_counter(
            "starlette_jobs.jobs.retried",
            unit="{job}",
            description="Failed attempts whose job was scheduled to run again.",
        )
        self.rescued: Counter = meter.create_counter(
            "starlette_jobs.jobs.rescued",
            unit="{job}",
            description="Running jobs given back or failed because their worker was lost.",
        )
        self.ticks: Counter = meter.create_counter(
            "starlette_jobs.schedule.ticks",
            unit="{tick}",
            description="Ticks of the schedules, as recorded.",
        )
        meter.create_observable_gauge(
            "starlette_jobs.queue.depth",
            callbacks=[self._observe("depth")],
            unit="{job}",
            description="Unfinished jobs of each queue, by status (pending, running).",
        )
        meter.create_observable_gauge(
            "starlette_jobs.queue.due",
            callbacks=[self._observe("due")],
            unit="{job}",
            description="Pending jobs of each queue that are due now.",
        )
        meter.create_observable_gauge(
            "starlette_jobs.queue.oldest_due_age",
            callbacks=[self._observe("oldest_due_age")],
            unit="s",
            description="How long the oldest due job of each queue has waited since it came due.",
        )
        self._provider = weakref.ref(provider)

    def _observe(self, what: str) -> Any:
        def callback(options: CallbackOptions) -> Iterable[Observation]:
            return list(self._observations(what))

        return callback

    def _observations(self, what: str) -> Iterator[Observation]:
        provider = self._provider()
        with _REPORTING_LOCK:  # the SDK collects on a thread of its own
            every = list(_REPORTING)
        for reporting in every:
            if provider is None or reporting.provider() is not provider:
                continue
            for depth in reporting.depths:
                queue = {SYSTEM: MESSAGING_SYSTEM, QUEUE: depth.queue}
                if what == "depth":
                    yield Observation(depth.pending, {**queue, STATUS: "pending"})
                    yield Observation(depth.running, {**queue, STATUS: "running"})
                elif what == "due":
                    yield Observation(depth.due, queue)
                else:
                    yield Observation(depth.oldest_due_age, queue)


def _operation(name: str, kind: str, queue: str) -> dict[str, str]:
    return {SYSTEM: MESSAGING_SYSTEM, OPERATION: name, OPERATION_TYPE: kind, QUEUE: queue}


# Every `Metrics` alive, for the gauges' callbacks; and the instruments of each provider.
_REPORTING: weakref.WeakSet[Metrics] = weakref.WeakSet()
_REPORTING_LOCK = threading.Lock()
_INSTRUMENTS: weakref.WeakKeyDictionary[MeterProvider, Instruments] = weakref.WeakKeyDictionary()

# The API's stand-in until a provider is set (no public name): it records nothing.
_PROXY_TYPE: type[Any] = type(getattr(_api, "_PROXY_METER_PROVIDER", NoOpMeterProvider()))

# Read once: OpenTelemetry loads a provider named by this variable on first use.
_PROVIDER_FROM_ENVIRONMENT = "OTEL_PYTHON_METER_PROVIDER" in os.environ


def _global_meter_provider() -> MeterProvider | None:
    """`metrics.get_meter_provider()`, minus its look-up of the environment on every call
    while no provider is set: None then."""
    if not _PROVIDER_FROM_ENVIRONMENT and getattr(_api, "_METER_PROVIDER", False) is None:
        return None
    return metrics.get_meter_provider()
