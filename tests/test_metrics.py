"""The metrics (`_metrics.Metrics`), read through the SDK's in-memory reader after a drain, on
both stores: the messaging conventions' counts and durations match the jobs run; and nothing
is made or recorded without an SDK. The queues' gauges and their one reporter:
worker/test_depths.py."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.metrics import NoOpMeterProvider
from opentelemetry.metrics import _internal as metrics_api
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import HistogramDataPoint, InMemoryMetricReader

from starlette_jobs import Jobs, Retry, _metrics, job
from starlette_jobs._metrics import Metrics

flaky_failures: list[int] = []


@job(name="tests.metrics.ok", queue="metrics")
async def ok(n: int) -> int:
    return n


@job(name="tests.metrics.slow", queue="metrics")
async def slow() -> None:
    await asyncio.sleep(0.05)


@job(name="tests.metrics.flaky", queue="metrics", retry=Retry.fixed(max_attempts=2, delay=0))
async def flaky() -> None:
    if not flaky_failures:
        flaky_failures.append(1)
        raise ValueError("first attempt fails")


@job(name="tests.metrics.broken", queue="metrics", retry=Retry.none())
async def broken() -> None:
    raise KeyError("never works")


Point = tuple[dict[str, Any], Any]


def points(reader: InMemoryMetricReader) -> dict[str, list[Point]]:
    """Each metric's data points by name: (attributes, the point)."""
    found: dict[str, list[Point]] = {}
    data = reader.get_metrics_data()
    for resource in data.resource_metrics if data is not None else []:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                found[metric.name] = [
                    (dict(point.attributes or {}), point) for point in metric.data.data_points
                ]
    return found


def total(found: dict[str, list[Point]], name: str, **wanted: Any) -> float:
    """The sum of `name`'s counter points (or histogram counts) whose attributes match."""
    matched = [
        point
        for attributes, point in found.get(name, [])
        if all(attributes.get(key.replace("__", ".")) == v for key, v in wanted.items())
    ]
    return sum(p.count if isinstance(p, HistogramDataPoint) else p.value for p in matched)


@pytest.fixture
def reader() -> InMemoryMetricReader:
    return InMemoryMetricReader()


@pytest.fixture
def provider(reader: InMemoryMetricReader) -> Iterator[MeterProvider]:
    provider = MeterProvider(metric_readers=[reader])
    yield provider
    provider.shutdown()


@pytest.fixture(autouse=True)
def _fresh_flaky() -> None:
    flaky_failures.clear()


async def test_counts_and_durations_match_the_jobs_run(
    jobs_dsn: str, provider: MeterProvider, reader: InMemoryMetricReader
) -> None:
    async with Jobs(jobs_dsn, queues={"metrics": 4}, meter_provider=provider) as jobs:
        await ok.enqueue_many([{"n": 1}, {"n": 2}, {"n": 3}])
        await slow.enqueue()
        await flaky.enqueue()
        await broken.enqueue()
        await jobs.drain()
    found = points(reader)
    sent = "messaging.client.sent.messages"
    assert total(found, sent) == 6
    assert total(found, sent, starlette_jobs__job__name="tests.metrics.ok") == 3
    [(attributes, _), *_] = found[sent]
    assert attributes["messaging.system"] == "starlette_jobs"
    assert attributes["messaging.operation.name"] == "send"
    assert attributes["messaging.destination.name"] == "metrics"
    # Six jobs, one of them claimed twice.
    assert (
        total(found, "messaging.client.consumed.messages", messaging__operation__name="receive")
        == 7
    )

    process = "messaging.process.duration"
    assert total(found, process) == 7
    assert total(found, process, starlette_jobs__outcome="succeeded") == 5
    retried = [(a, p) for a, p in found[process] if a["starlette_jobs.outcome"] == "retried"]
    assert [(a["error.type"], a["starlette_jobs.job.name"]) for a, _ in retried] == [
        ("ValueError", "tests.metrics.flaky")
    ]
    [(failed, _)] = [(a, p) for a, p in found[process] if a["starlette_jobs.outcome"] == "failed"]
    assert (failed["error.type"], failed["starlette_jobs.job.name"]) == (
        "KeyError", "tests.metrics.broken"
    )  # fmt: skip
    assert all(
        "error.type" not in a
        for a, _ in found[process]
        if a["starlette_jobs.outcome"] == "succeeded"
    )
    [(_, slow_point)] = [
        (a, p) for a, p in found[process] if a["starlette_jobs.job.name"] == "tests.metrics.slow"
    ]
    assert 0.05 <= slow_point.min < 5
    assert total(found, "starlette_jobs.jobs.retried", error__type="ValueError") == 1

    operations = "messaging.client.operation.duration"
    assert total(found, operations, messaging__operation__name="send") == 4  # one per enqueue
    assert total(found, operations, messaging__operation__name="receive") >= 2
    assert total(found, operations, messaging__operation__name="settle") >= 1
    assert all(
        a["messaging.operation.type"] == a["messaging.operation.name"] for a, _ in found[operations]
    )


async def test_a_failed_enqueue_is_counted_with_its_error_type(
    provider: MeterProvider, reader: InMemoryMetricReader, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with Jobs("memory://", queues={}, meter_provider=provider) as jobs:
        store = jobs._ready_store

        async def refuse(*args: object) -> list[int]:
            raise RuntimeError("disk full")

        monkeypatch.setattr(store, "insert_jobs", refuse)
        with pytest.raises(RuntimeError):
            await ok.enqueue(n=1)
    found = points(reader)
    assert total(found, "messaging.client.sent.messages", error__type="RuntimeError") == 1
    assert total(found, "messaging.client.operation.duration", error__type="RuntimeError") == 1


async def test_without_an_sdk_nothing_is_made_or_recorded(
    jobs_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(self: object, provider: object) -> None:
        raise AssertionError("an instrument was made without an SDK")

    monkeypatch.setattr(_metrics.Instruments, "__init__", refuse)
    assert metrics_api._METER_PROVIDER is None  # the tests set no global provider
    for provider in (None, NoOpMeterProvider()):
        async with Jobs(jobs_dsn, queues={"metrics": 2}, meter_provider=provider) as jobs:
            await ok.enqueue(n=1)
            await flaky.enqueue()
            await jobs.drain()
            assert jobs._metrics.recording() is False


async def test_a_global_provider_set_after_jobs_was_made_is_used(
    monkeypatch: pytest.MonkeyPatch, provider: MeterProvider, reader: InMemoryMetricReader
) -> None:
    jobs = Jobs("memory://", queues={"metrics": 2})
    # What `metrics.set_meter_provider` sets, once per process: undone after the test.
    monkeypatch.setattr(metrics_api, "_METER_PROVIDER", provider)
    async with jobs:
        await ok.enqueue(n=1)
        await jobs.drain()
    assert (
        total(points(reader), "messaging.process.duration", starlette_jobs__outcome="succeeded")
        == 1
    )


def test_two_jobs_on_one_provider_share_its_instruments(provider: MeterProvider) -> None:
    first, second = Metrics(provider), Metrics(provider)
    assert first.instruments() is second.instruments()
    assert Metrics(MeterProvider()).instruments() is not first.instruments()
