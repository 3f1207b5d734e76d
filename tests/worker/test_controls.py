"""The worker's copy of its queues' controls (`worker/_controls.py`), on the in-memory store: a
pause reaches the claim loop at once by notification, or within a poll interval without one;
running jobs finish; a resumed queue is claimed from again; a limited queue's ended jobs wake its
workers, an unlimited one's do not. On PostgreSQL with several processes:
processes/test_limits.py."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any
from uuid import UUID

import pytest

from starlette_jobs import JobStatus, QueueLimits, job
from starlette_jobs._tracing import Tracing
from starlette_jobs.memory._rows import QueueListener
from starlette_jobs.memory._store import MemoryStore
from starlette_jobs.worker._controls import QueueControlsCopy, warn_of_unkeyed_jobs
from starlette_jobs.worker._settings import WorkerSettings
from starlette_jobs.worker._worker import Worker
from tests.conftest import eventually
from tests.records import new_jobs

QUEUE = "controls-tests"
gates: list[asyncio.Event] = []


@job(queue=QUEUE)
async def wait_for_gate(n: int) -> int:
    await gates[-1].wait()
    return n


@pytest.fixture
def gate() -> asyncio.Event:
    gates.append(asyncio.Event())
    return gates[-1]


class DeafToControls(MemoryStore):
    """Its listener never passes a change of controls on (a notification lost with its
    connection), and it notes every `wake_queues`."""

    def __init__(self) -> None:
        super().__init__()
        self.woken: list[list[str]] = []

    async def listen(
        self,
        queues: Sequence[str],
        on_notify: Callable[[str], None],
        on_cancel: Callable[[UUID], None] | None = None,
        on_controls: Callable[[str], None] | None = None,
    ) -> QueueListener:
        return await super().listen(queues, on_notify, on_cancel, None)

    async def wake_queues(self, queues: Sequence[str]) -> None:
        self.woken.append(list(queues))
        await super().wake_queues(queues)


@asynccontextmanager
async def running(store: MemoryStore, **changes: Any) -> AsyncIterator[Worker]:
    values: dict[str, Any] = {
        "queues": {QUEUE: 3},
        "batch_size": 100,
        "poll_interval": 3600.0,  # no poll: only a notification can reach the worker in time
        "lease_duration": 30.0,
        "shutdown_grace": 5.0,
        "retention": None,
    }
    worker = Worker(store, WorkerSettings(**{**values, **changes}), Tracing())
    await worker.start()
    try:
        yield worker
    finally:
        await worker.stop()


async def enqueue(store: MemoryStore, count: int) -> list[int]:
    return await store.insert_jobs(
        new_jobs(count, name=wait_for_gate.name, queue=QUEUE, payload='{"n": 1}')
    )


async def status_of(store: MemoryStore, job_id: int) -> JobStatus | None:
    return await store.job_status(job_id)


def has_status(store: MemoryStore, job_id: int, status: JobStatus) -> Callable[[], Any]:
    async def check() -> bool:
        return await store.job_status(job_id) is status

    return check


async def test_a_pause_stops_claims_at_once_running_jobs_finish_and_resume_claims_again(
    gate: asyncio.Event,
) -> None:
    store = MemoryStore()
    [first, second] = await enqueue(store, 2)
    async with running(store) as worker:
        await eventually(has_status(store, second, JobStatus.RUNNING), "both jobs running")
        await store.set_paused(QUEUE, True)
        [later] = await enqueue(store, 1)  # its NOTIFY wakes the claim loop, which must not claim
        gate.set()
        await eventually(has_status(store, second, JobStatus.SUCCEEDED), "the jobs finishing")
        await worker._outcomes.flush()
        assert await status_of(store, first) is JobStatus.SUCCEEDED
        assert await status_of(store, later) is JobStatus.PENDING
        # No poll for an hour: the resume reaches the worker by its notification.
        await store.set_paused(QUEUE, False)
        await eventually(has_status(store, later, JobStatus.SUCCEEDED), "the resumed queue")


async def test_without_its_notification_a_pause_and_a_resume_reach_the_worker_by_the_poll(
    gate: asyncio.Event,
) -> None:
    gate.set()
    store = DeafToControls()
    async with running(store, poll_interval=0.05) as worker:
        await store.set_paused(QUEUE, True)

        async def paused() -> bool:
            return worker._controls.paused(QUEUE)

        await eventually(paused, "the worker reading the pause")
        [job_id] = await enqueue(store, 1)
        await store.set_paused(QUEUE, False)
        await eventually(has_status(store, job_id, JobStatus.SUCCEEDED), "the resumed queue")


async def test_a_limited_queues_ended_jobs_wake_its_workers_and_an_unlimited_ones_do_not(
    gate: asyncio.Event,
) -> None:
    gate.set()
    store = DeafToControls()
    async with running(store, queues={QUEUE: 3, "plain": 3}) as worker:
        await store.insert_jobs(new_jobs(2, name=wait_for_gate.name, queue="plain"))
        await worker.drain(10, include_scheduled=True)
        assert store.woken == []
    limits = {QUEUE: QueueLimits(global_limit=2)}
    async with running(store, limits=limits) as worker:
        assert worker._controls.limited(QUEUE)
        await enqueue(store, 5)
        await worker.drain(10, include_scheduled=True)
        assert store.woken != []
        assert all(woken == [QUEUE] for woken in store.woken)
    counts = await store.count_by_status(QUEUE)
    assert counts[JobStatus.SUCCEEDED] == 5


async def test_the_copy_declares_reads_and_wakes_a_queue_whose_controls_eased() -> None:
    store = MemoryStore()
    await store.set_paused("a", True)
    woken: list[str] = []
    copy = QueueControlsCopy(
        store, ["a", "b"], {"b": QueueLimits(global_limit=1)}, 60, woken.append
    )
    assert not copy.paused("a")  # before the first read: what this worker declares
    await copy.start()
    try:
        assert (copy.paused("a"), copy.limited("a"), copy.paused("b"), copy.limited("b")) == (
            True,
            False,
            False,
            True,
        )
        assert (await store.queue_controls(["b"]))["b"].limits.global_limit == 1
        await store.set_paused("a", False)
        await store.set_paused("b", False)
        copy.changed("b")  # told that b's controls changed: b claims nothing until read again
        assert copy.paused("b")
        await copy.refresh()
        assert woken == ["a", "b"]  # a resumed; b was held back by the change, then let go
        copy.changed("not-ours")  # another queue's change costs nothing
        await store.set_paused("b", True)
        await copy.refresh()
        assert woken == ["a", "b"]  # a pause wakes no one
    finally:
        await copy.stop()


async def test_a_rate_limited_queue_claims_again_once_its_period_has_passed_without_a_poll(
    gate: asyncio.Event,
) -> None:
    gate.set()
    store = MemoryStore()
    limits = {QUEUE: QueueLimits(rate_limit=2, rate_period=0.1)}
    ids = await enqueue(store, 6)
    # No poll for an hour, and a finished job announces no room for a start: only the wake-up
    # the rate period calls for claims the next ones.
    async with running(store, limits=limits):
        for job_id in ids:
            await eventually(has_status(store, job_id, JobStatus.SUCCEEDED), "each job")


class CountingClaims(MemoryStore):
    """Notes every claim of a limited queue."""

    def __init__(self) -> None:
        super().__init__()
        self.limited_claims = 0

    async def claim_limited_batch(
        self,
        queue: str,
        limit: int,
        worker_id: str,
        lease_seconds: float,
        ended: Sequence[UUID] = (),
        names: Sequence[str] | None = None,
    ) -> list[Any]:
        self.limited_claims += 1
        return await super().claim_limited_batch(
            queue, limit, worker_id, lease_seconds, ended, names
        )


async def test_an_idle_rate_limited_queue_with_a_short_period_is_not_claimed_in_a_loop() -> None:
    """Nothing to claim: a claim that came back short because the queue is empty, not because
    of the rate limit, must not call for a claim every rate period (here 100 a second, each
    taking the queue's row lock on PostgreSQL, for as long as the queue stays empty)."""
    store = CountingClaims()
    limits = {QUEUE: QueueLimits(rate_limit=5, rate_period=0.01)}
    async with running(store, limits=limits, poll_interval=1.0):
        await asyncio.sleep(0.5)  # idle: measures the claims made meanwhile, waits for no job
    assert store.limited_claims <= 5


@job(queue="controls-keyed")
async def without_the_key(order: int) -> None: ...


@job(queue="controls-keyed")
async def with_a_default_key(order: int, customer: str = "anyone") -> None: ...


@job(queue="controls-keyed")
async def with_the_key(order: int, customer: str) -> None: ...


def test_a_key_limit_that_cannot_reach_a_job_of_its_queue_is_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A misspelt `key=`, or a key argument with a default (not stored when left out), limits
    nothing for that job: the worker says so as it starts, naming the job."""
    warn_of_unkeyed_jobs({"controls-keyed": QueueLimits(key="customer", key_limit=1)})
    warned = [r.getMessage() for r in caplog.records if "controls-keyed" in r.getMessage()]
    assert len(warned) == 2
    assert f"job {without_the_key.name!r} takes no such argument" in warned[0] + warned[1]
    assert f"job {with_a_default_key.name!r} gives it a default" in warned[0] + warned[1]
    assert with_the_key.name not in " ".join(warned)
