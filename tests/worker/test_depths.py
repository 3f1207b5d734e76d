"""The queues' gauges (`worker/_depths.py`): read by one worker of those sharing a database, the
live one with the smallest id, so that the depth of each queue is reported once, whatever the
number of workers; none read without an SDK. Each attempt's record: test_metrics.py."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from datetime import timedelta

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from starlette_jobs import Jobs, job
from starlette_jobs._errors import DatabaseUnavailableError
from starlette_jobs._metric_records import QueueDepth
from starlette_jobs._metrics import Metrics
from starlette_jobs._worker_records import NewWorker, WorkerRecord
from starlette_jobs.memory._store import MemoryStore
from starlette_jobs.testing import simulate_outage
from starlette_jobs.worker._depths import DepthReporter
from tests.records import new_jobs
from tests.test_metrics import points


@job(name="tests.depths.noop", queue="depths")
async def noop() -> None:
    pass


@pytest.fixture
def reader() -> InMemoryMetricReader:
    return InMemoryMetricReader()


@pytest.fixture
def provider(reader: InMemoryMetricReader) -> Iterator[MeterProvider]:
    provider = MeterProvider(metric_readers=[reader])
    yield provider
    provider.shutdown()


def depth_points(reader: InMemoryMetricReader) -> list[tuple[str, str, int]]:
    """(queue, status, jobs) of every `starlette_jobs.queue.depth` point, sorted."""
    return sorted(
        (a["messaging.destination.name"], a["starlette_jobs.job.status"], p.value)
        for a, p in points(reader).get("starlette_jobs.queue.depth", [])
    )


async def test_two_workers_on_one_database_report_each_queue_once(
    jobs_dsn: str, provider: MeterProvider, reader: InMemoryMetricReader
) -> None:
    first = Jobs(jobs_dsn, queues={"depths": 1}, meter_provider=provider)
    second = Jobs(jobs_dsn, queues={"other": 1}, meter_provider=provider)
    async with first, second:
        # Every queue of the database is reported, worked by either worker or by none.
        await noop.configure(delay=3600).enqueue()
        await noop.configure(queue="idle", delay=3600).enqueue()
        reporters: dict[str, DepthReporter] = {}
        for jobs in (first, second):
            assert jobs._worker is not None
            reporters[jobs._worker.worker_id] = jobs._worker.depths
        reported = {worker: await depths.round() for worker, depths in reporters.items()}
        assert reported == {worker: worker == min(reporters) for worker in reporters}
        assert depth_points(reader) == [
            ("depths", "pending", 1), ("depths", "running", 0),
            ("idle", "pending", 1), ("idle", "running", 0),
        ]  # fmt: skip


async def test_the_reporter_hands_over_when_it_stops(
    jobs_dsn: str, provider: MeterProvider, reader: InMemoryMetricReader
) -> None:
    a = Jobs(jobs_dsn, queues={"depths": 1}, meter_provider=provider)
    b = Jobs(jobs_dsn, queues={"depths": 1}, meter_provider=provider)
    async with a:
        async with b:
            low, high = sorted([a, b], key=lambda jobs: str(jobs.worker_id))
            assert low._worker is not None
            assert high._worker is not None
            await noop.configure(delay=3600).enqueue()
            assert await high._worker.depths.round() is False
            assert await low._worker.depths.round() is True
            assert depth_points(reader) == [("depths", "pending", 1), ("depths", "running", 0)]
        # `b` stopped and left the registry: if it was the reporter, `a` is now.
        assert a._worker is not None
        assert await a._worker.depths.round() is True
        assert depth_points(reader) == [("depths", "pending", 1), ("depths", "running", 0)]
    assert depth_points(reader) == []  # a stopped worker reports nothing


def new_worker(worker_id: str) -> NewWorker:
    return NewWorker(worker_id, "host", 1, ("depths",), (), "0", heartbeat_seconds=1.0)


async def test_a_dead_workers_row_does_not_keep_the_report(provider: MeterProvider) -> None:
    store = MemoryStore()
    for worker_id in ("a", "b"):
        await store.register_worker(new_worker(worker_id))
    await store.insert_jobs(new_jobs(2, queue="depths"))
    metrics = Metrics(provider)
    reporter = DepthReporter(store, "b", metrics, 1.0)
    assert await reporter.round() is False
    assert metrics.depths == []
    # "a" was last seen more than three of its heartbeats before "b": taken for dead.
    row = store.data.workers["a"]
    store.data.workers["a"] = dataclasses.replace(
        row, last_seen=row.last_seen - timedelta(seconds=3.5)
    )
    assert await reporter.round() is True
    [depth] = metrics.depths
    assert (depth.queue, depth.pending, depth.due) == ("depths", 2, 2)


async def test_a_worker_missing_from_the_registry_does_not_report(provider: MeterProvider) -> None:
    store = MemoryStore()
    reporter = DepthReporter(store, "w", Metrics(provider), 1.0)
    assert await reporter.round() is False  # an empty registry
    await store.register_worker(new_worker("x"))
    assert await reporter.round() is False


async def test_without_an_sdk_nothing_is_read() -> None:
    class Unread(MemoryStore):
        async def list_workers(self) -> list[WorkerRecord]:
            raise AssertionError("read without an SDK")

    store = Unread()
    metrics = Metrics()
    metrics.depths = [QueueDepth("stale", 1, 1, 0, 0.0)]
    assert await DepthReporter(store, "w", metrics, 1.0).round() is False
    assert metrics.depths == []


async def test_a_failed_read_drops_the_depths_read_before(provider: MeterProvider) -> None:
    """The depths read before a database outage were reported through it: a backlog worked
    off since (or one that grew) went on showing as it was."""
    jobs = Jobs("memory://", queues={})  # no worker: the reporter below is the only one
    async with jobs:
        store = jobs._store
        assert isinstance(store, MemoryStore)
        await store.register_worker(new_worker("w"))
        await store.insert_jobs(new_jobs(2, queue="depths"))
        metrics = Metrics(provider)
        reporter = DepthReporter(store, "w", metrics, 1.0)
        assert await reporter.round() is True
        assert [depth.pending for depth in metrics.depths] == [2]
        with simulate_outage(jobs), pytest.raises(DatabaseUnavailableError):
            await reporter.round()
        assert metrics.depths == []
