"""The worker (`_worker`) driven directly on the in-memory store: how many jobs a claim asks
for, concurrency per queue, drain, and what shutdown does with running jobs and how long it
may take. On PostgreSQL, under faults: integration/test_shutdown.py, test_concurrency.py,
test_lost_claims.py and processes/."""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any
from uuid import UUID

import pytest

from starlette_jobs import JobStatus, current_job, job
from starlette_jobs._memory import MemoryStore
from starlette_jobs._records import Claim
from starlette_jobs._tracing import Tracing
from starlette_jobs._worker import Worker, WorkerSettings, new_worker_id
from tests.conftest import eventually
from tests.records import new_jobs

QUEUE = "worker-tests"


def test_a_worker_id_names_its_host_and_process_and_is_unique() -> None:
    host, pid, suffix = new_worker_id().rsplit(":", 2)
    assert (host, pid) == (socket.gethostname(), str(os.getpid()))
    assert len(suffix) == 8
    assert int(suffix, 16) >= 0
    assert new_worker_id() != new_worker_id()


class Gate:
    """Jobs wait here until the test opens it; `started` counts those that got in."""

    def __init__(self) -> None:
        self.open = asyncio.Event()
        self.started = 0


gates: list[Gate] = []


@job(queue=QUEUE)
async def wait_at_gate(n: int) -> int:
    gate = gates[-1]
    gate.started += 1
    await gate.open.wait()
    return n


@pytest.fixture
def gate() -> Gate:
    gates.append(Gate())
    return gates[-1]


class RecordingStore(MemoryStore):
    """The in-memory store, noting the `limit` of each claim; `fail_claims` claims fail."""

    def __init__(self, fail_claims: int = 0) -> None:
        super().__init__()
        self.limits: list[int] = []
        self.fail_claims = fail_claims
        self.reconciled: list[str] = []

    async def claim_batch(
        self, queue: str, limit: int, worker_id: str, lease_seconds: float
    ) -> list[Claim]:
        if self.fail_claims:
            self.fail_claims -= 1
            raise ConnectionResetError("connection reset by peer")
        self.limits.append(limit)
        return await super().claim_batch(queue, limit, worker_id, lease_seconds)

    async def release_unknown_claims(self, queue: str, worker_id: str, known: Any) -> list[int]:
        self.reconciled.append(queue)
        return await super().release_unknown_claims(queue, worker_id, known)


def settings(**changes: Any) -> WorkerSettings:
    values: dict[str, Any] = {
        "queues": {QUEUE: 3},
        "batch_size": 100,
        "poll_interval": 0.05,
        "lease_duration": 30.0,
        "shutdown_grace": 5.0,
        "retention": None,
    }
    return WorkerSettings(**{**values, **changes})


@asynccontextmanager
async def running(store: MemoryStore, **changes: Any) -> AsyncIterator[Worker]:
    worker = Worker(store, settings(**changes), Tracing())
    await worker.start()
    try:
        yield worker
    finally:
        await worker.stop()


async def enqueue(store: MemoryStore, count: int, **options: Any) -> list[int]:
    return await store.insert_jobs(
        new_jobs(count, name=wait_at_gate.name, queue=QUEUE, payload='{"n": 1}', **options)
    )


def at_least(count: int, gate: Gate) -> Callable[[], Any]:
    async def check() -> bool:
        return gate.started >= count

    return check


async def statuses(store: MemoryStore) -> list[JobStatus]:
    return sorted(r.status for r in await store.list_jobs(None, QUEUE, 100))


async def test_a_claim_asks_for_no_more_than_the_free_slots_and_the_batch_size(
    gate: Gate,
) -> None:
    store = RecordingStore()
    await enqueue(store, 10)
    async with running(store, queues={QUEUE: 3}, batch_size=2) as worker:
        await eventually(at_least(3, gate), "three jobs running")
        assert store.limits[:2] == [2, 1]  # the batch size, then the one slot left
        assert max(store.limits) <= 2
        assert worker.running_count() == 3
        assert await statuses(store) == [JobStatus.PENDING] * 7 + [JobStatus.RUNNING] * 3
        gate.open.set()
        await worker.drain(10, include_scheduled=True)
    assert await statuses(store) == [JobStatus.SUCCEEDED] * 10
    assert gate.started == 10


@job(queue=QUEUE)
async def quick(n: int) -> None:
    await asyncio.sleep(0)


class RoundTripStore(RecordingStore):
    """Claims take a round trip, as over a network: jobs running meanwhile end during it."""

    async def claim_batch(
        self, queue: str, limit: int, worker_id: str, lease_seconds: float
    ) -> list[Claim]:
        await asyncio.sleep(0.002)
        return await super().claim_batch(queue, limit, worker_id, lease_seconds)


async def test_a_worker_protecting_its_loop_claims_quick_jobs_in_growing_batches() -> None:
    # Quick jobs end during the next claim's round trip: one job per claim would be all the
    # limit let through if it grew only while it saw jobs running.
    store = RoundTripStore()
    await store.insert_jobs(new_jobs(2000, name=quick.name, queue=QUEUE, payload='{"n": 1}'))
    async with running(store, queues={QUEUE: 10}, loop_lag_target=0.005) as worker:
        await worker.drain(60, include_scheduled=True)
    assert (await store.count_unfinished([QUEUE], None, None)).waited == 0
    assert store.limits[0] == 1  # a protected queue starts at one job
    # Each claim asks for what the limit leaves; a limit stuck at one or two running jobs
    # (one claimed, one ending during the round trip) is what this guards against.
    assert max(store.limits) > 2


async def test_drain_leaves_scheduled_jobs_unless_asked_to_wait_for_them(gate: Gate) -> None:
    store = MemoryStore()
    gate.open.set()
    await enqueue(store, 1)
    await enqueue(store, 1, delay=1.5)
    await enqueue(store, 1, delay=3600)
    async with running(store) as worker:
        await worker.drain(10, include_scheduled=False)
        assert await statuses(store) == [JobStatus.PENDING] * 2 + [JobStatus.SUCCEEDED]
        # Waits for the job due within its timeout, not for the one an hour away.
        await worker.drain(10, include_scheduled=True)
        assert await statuses(store) == [JobStatus.PENDING] + [JobStatus.SUCCEEDED] * 2


async def test_drain_gives_up_after_its_timeout_while_a_job_runs(gate: Gate) -> None:
    store = MemoryStore()
    await enqueue(store, 1)
    async with running(store) as worker:
        await eventually(at_least(1, gate), "the job running")
        with pytest.raises(TimeoutError):
            await worker.drain(0.2, include_scheduled=False)
        gate.open.set()


async def test_jobs_that_outlast_the_grace_are_given_back_with_their_attempt(gate: Gate) -> None:
    store = MemoryStore()
    ids = await enqueue(store, 2)
    async with running(store, shutdown_grace=0.0) as worker:
        await eventually(at_least(2, gate), "both jobs running")
    assert worker.abandoned == 0  # they unwound when cancelled
    for job_id in ids:
        record = await store.get_job(job_id)
        assert record is not None
        assert (record.status, record.attempts) == (JobStatus.PENDING, 0)


async def test_jobs_that_finish_within_the_grace_succeed(gate: Gate) -> None:
    store = MemoryStore()
    await enqueue(store, 2)
    async with running(store) as worker:
        await eventually(at_least(2, gate), "both jobs running")
        stopping = asyncio.create_task(worker.stop())
        await asyncio.sleep(0)  # the stop has begun: nothing more is claimed
        await enqueue(store, 1)
        gate.open.set()
        await stopping
    assert await statuses(store) == [JobStatus.PENDING] + [JobStatus.SUCCEEDED] * 2


async def test_a_failing_claim_is_retried_after_giving_back_what_it_may_have_taken(
    gate: Gate, caplog: pytest.LogCaptureFixture
) -> None:
    store = RecordingStore(fail_claims=2)
    gate.open.set()
    await enqueue(store, 3)
    async with running(store) as worker:
        await worker.drain(10, include_scheduled=False)
    assert await statuses(store) == [JobStatus.SUCCEEDED] * 3
    assert QUEUE in store.reconciled
    assert f"claiming from queue {QUEUE!r} failed, retrying: connection reset by peer" in (
        caplog.messages
    )


async def test_waking_a_queue_the_worker_does_not_run_is_ignored() -> None:
    store = MemoryStore()
    async with running(store) as worker:
        worker.wake("not-mine")
        assert worker.queue_names == [QUEUE]
        assert worker.running_count() == 0


# -- cancel on request, and progress --------------------------------------------------------


@job(queue=QUEUE)
async def count_until_cancelled(n: int) -> dict[str, int]:
    gate = gates[-1]
    gate.started += 1
    counted = 0
    try:
        while True:
            counted += 1
            current = current_job()
            assert current is not None
            current.report_progress({"counted": counted})
            await asyncio.sleep(0.001)
    except asyncio.CancelledError:
        return {"counted": counted}


@job(queue=QUEUE)
def count_in_thread_until_cancelled(n: int) -> dict[str, int]:
    gate = gates[-1]
    gate.started += 1
    current = current_job()
    assert current is not None
    counted = 0
    while not current.cancel_requested:
        counted += 1
    return {"counted": counted}


class DeafStore(MemoryStore):
    """Its listener never passes cancel requests on: only the heartbeat tells the worker."""

    async def listen(
        self,
        queues: Any,
        on_notify: Callable[[str], None],
        on_cancel: Callable[[UUID], None] | None = None,
    ) -> Any:
        return await super().listen(queues, on_notify, None)


async def run_and_cancel(store: MemoryStore, gate: Gate, name: str, **changes: Any) -> int:
    [job_id] = await store.insert_jobs(new_jobs(1, name=name, queue=QUEUE, payload='{"n": 1}'))
    async with running(store, **changes) as worker:
        await eventually(at_least(1, gate), "the job running")
        assert await store.cancel_job(job_id) is JobStatus.RUNNING
        await worker.drain(10, include_scheduled=True)
    return job_id


@pytest.mark.parametrize("name", [count_until_cancelled.name, count_in_thread_until_cancelled.name])
async def test_a_job_cancelled_on_request_ends_cancelled_with_what_it_returned(
    name: str, gate: Gate
) -> None:
    store = MemoryStore()
    job_id = await run_and_cancel(store, gate, name)
    record = await store.get_job(job_id)
    assert record is not None
    assert (record.status, record.attempts, gate.started) == (JobStatus.CANCELLED, 1, 1)
    assert set(record.result) == {"counted"}
    assert record.result["counted"] > 0
    assert record.errors == []


async def test_the_last_progress_is_kept_with_the_outcome(gate: Gate) -> None:
    store = MemoryStore()
    job_id = await run_and_cancel(store, gate, count_until_cancelled.name)
    record = await store.get_job(job_id)
    assert record is not None
    assert record.progress == record.result  # the last count reported is the one returned


async def test_a_cancel_request_missed_by_the_listener_arrives_with_the_heartbeat(
    gate: Gate,
) -> None:
    store = DeafStore()
    job_id = await run_and_cancel(store, gate, count_until_cancelled.name, lease_duration=0.3)
    record = await store.get_job(job_id)
    assert record is not None
    assert (record.status, record.attempts) == (JobStatus.CANCELLED, 1)


async def test_a_request_for_another_workers_attempt_changes_nothing_here(gate: Gate) -> None:
    store = MemoryStore()
    await enqueue(store, 1)
    [other] = await store.insert_jobs(new_jobs(1, queue="elsewhere"))
    async with running(store) as worker:
        await eventually(at_least(1, gate), "the job running")
        await store.claim_batch("elsewhere", 1, "another-worker", 30)
        assert await store.cancel_job(other) is JobStatus.RUNNING
        gate.open.set()
        await worker.drain(10, include_scheduled=True)
    assert await statuses(store) == [JobStatus.SUCCEEDED]
