"""The lifecycle contract, through `Jobs`, on PostgreSQL and memory alike: waiting for a job
(`wait`, `result`), the history of its changes (`events`, and `events=False`), and a look at
what the next claim takes (`peek`). The store-level contract is in test_store_contract.py."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import date
from typing import Any

import pytest

from starlette_jobs import (
    EventKind,
    JobCancelledError,
    JobEvent,
    JobFailedError,
    JobResultError,
    Jobs,
    JobStatus,
    Retry,
    current_job,
    job,
)

gates: dict[int, asyncio.Event] = {}
started: dict[int, asyncio.Event] = {}


@pytest.fixture(autouse=True)
def _fresh_gates() -> None:
    gates.clear()
    started.clear()


@pytest.fixture
async def jobs(jobs_dsn: str) -> AsyncIterator[Jobs]:
    async with Jobs(jobs_dsn, poll_interval=0.05) as started:
        yield started


@job(retry=Retry.fixed(max_attempts=2, delay=0.01))
async def gated(n: int, fail_first: bool = False) -> date:
    """Fails its first attempt if asked; then waits for the test to open its gate."""
    me = current_job()
    assert me is not None
    if fail_first and me.attempt == 1:
        raise ValueError("first try")
    await gates.setdefault(n, asyncio.Event()).wait()
    return date(2026, 1, n)


@job(retry=Retry.none())
async def cancellable(n: int) -> dict[str, int]:
    started.setdefault(n, asyncio.Event()).set()
    try:
        await gates.setdefault(n, asyncio.Event()).wait()
    except asyncio.CancelledError:
        return {"done": n}  # the partial result, kept
    return {"done": -1}


@job(retry=Retry.fixed(max_attempts=3, delay=3600))
async def retried_later(n: int) -> None:
    me = current_job()
    assert me is not None
    raise ValueError(f"try {me.attempt}")


@job(retry=Retry.none())
async def failing(n: int) -> None:
    raise RuntimeError(f"failure {n}")


@job(retry=Retry.fixed(max_attempts=3, delay=0))
async def returns_text(size: int) -> str:
    return "x" * size


RESULT_LIMIT = 1024 * 1024  # bytes of JSON, as docs/jobs-and-retries.md says


def kinds(events: list[JobEvent]) -> list[EventKind]:
    return [event.kind for event in events]


# -- wait and result ---------------------------------------------------------------------------


async def test_a_wait_ends_when_the_outcome_is_written(jobs: Jobs) -> None:
    job_id = await gated.enqueue(n=1)
    waiting = asyncio.create_task(jobs.wait(job_id, timeout=10))
    await asyncio.sleep(0.1)
    assert not waiting.done()
    assert (await jobs.get(job_id)).status is JobStatus.RUNNING  # type: ignore[union-attr]
    gates[1].set()
    async with asyncio.timeout(2):
        record = await waiting
    assert (record.status, record.result) == (JobStatus.SUCCEEDED, "2026-01-01")
    assert record.finished_at is not None


async def test_a_wait_outlasts_a_retry_and_result_is_of_the_return_type(jobs: Jobs) -> None:
    job_id = await gated.enqueue(n=2, fail_first=True)
    waiting = asyncio.create_task(jobs.result(gated, job_id, timeout=10))
    await asyncio.sleep(0.1)
    assert not waiting.done()
    gates.setdefault(2, asyncio.Event()).set()
    assert await waiting == date(2026, 1, 2)
    record = await jobs.get(job_id)
    assert record is not None
    assert record.attempts == 2


async def test_a_wait_times_out_and_the_job_goes_on(jobs: Jobs) -> None:
    job_id = await gated.enqueue(n=3)
    with pytest.raises(TimeoutError, match=f"job {job_id} did not finish within 0.1 s"):
        await jobs.wait(job_id, timeout=0.1)
    gates.setdefault(3, asyncio.Event()).set()
    assert (await jobs.wait(job_id, timeout=10)).status is JobStatus.SUCCEEDED


async def test_a_result_over_the_limit_is_dropped_with_a_warning_and_the_job_runs_once(
    jobs: Jobs, caplog: pytest.LogCaptureFixture
) -> None:
    # PostgreSQL would store it (up to jsonb's 256 MiB), the in-memory store anything: both
    # hold results to one limit, so that a test on either fails where production would.
    fits = await returns_text.enqueue(size=RESULT_LIMIT - 2)  # its quotes make it just fit
    too_big = await returns_text.enqueue(size=RESULT_LIMIT - 1)
    returned: str = await jobs.result(returns_text, fits, timeout=10)
    assert len(returned) == RESULT_LIMIT - 2
    with pytest.raises(JobResultError):
        await jobs.result(returns_text, too_big, timeout=10)
    record = await jobs.get(too_big)
    assert record is not None
    assert (record.status, record.attempts, record.result) == (JobStatus.SUCCEEDED, 1, None)
    assert (
        f"job {too_big} (tests.contract.test_lifecycle_contract.returns_text): result not "
        "stored: 1,048,577 bytes of JSON, over the limit of 1,048,576 bytes"
    ) in caplog.messages


async def test_a_failed_job_raises_its_error_to_result(jobs: Jobs) -> None:
    job_id = await failing.enqueue(n=4)
    with pytest.raises(JobFailedError, match="RuntimeError: failure 4") as failed:
        await jobs.result(failing, job_id, timeout=10)
    assert failed.value.record.status is JobStatus.FAILED
    assert (await jobs.wait(job_id, timeout=1)).last_error == failed.value.last_error


async def test_a_job_cancelled_while_it_runs_raises_with_its_partial_result(jobs: Jobs) -> None:
    job_id = await cancellable.enqueue(n=5)
    waiting = asyncio.create_task(jobs.result(cancellable, job_id, timeout=5))
    async with asyncio.timeout(5):
        await started.setdefault(5, asyncio.Event()).wait()
    try:
        assert await jobs.cancel(job_id)
        with pytest.raises(JobCancelledError) as cancelled:
            await waiting
    finally:
        gates.setdefault(5, asyncio.Event()).set()
    assert cancelled.value.record.status is JobStatus.CANCELLED
    assert cancelled.value.record.result == {"done": 5}


async def test_a_job_cancelled_before_its_retry_raises_with_its_last_error(jobs: Jobs) -> None:
    job_id = await retried_later.enqueue(n=6)
    await jobs.drain(timeout=10, include_scheduled=False)
    waiting = asyncio.create_task(jobs.result(retried_later, job_id, timeout=10))
    await asyncio.sleep(0.05)
    assert not waiting.done()
    assert await jobs.cancel(job_id)
    with pytest.raises(JobCancelledError, match=f"job {job_id} .* was cancelled") as cancelled:
        await waiting
    assert cancelled.value.record.status is JobStatus.CANCELLED
    assert "ValueError: try 1" in (cancelled.value.last_error or "")


async def test_a_pending_job_cancelled_ends_the_wait(jobs_dsn: str) -> None:
    async with Jobs(jobs_dsn, queues={}) as producer:
        job_id = await failing.enqueue(n=8)
        waiting = asyncio.create_task(producer.wait(job_id, timeout=10))
        await asyncio.sleep(0.05)
        assert await producer.cancel(job_id)
        async with asyncio.timeout(2):
            assert (await waiting).status is JobStatus.CANCELLED


async def test_many_waits_on_many_jobs_each_get_their_own(jobs: Jobs) -> None:
    ids = [await gated.enqueue(n=n) for n in range(7, 17)]
    waits = [asyncio.create_task(jobs.wait(i, timeout=10)) for i in ids for _ in range(3)]
    await asyncio.sleep(0.05)
    for n in range(7, 17):
        gates.setdefault(n, asyncio.Event()).set()
    records = await asyncio.gather(*waits)
    assert [r.id for r in records] == [i for i in ids for _ in range(3)]
    assert [r.result for r in records][::3] == [f"2026-01-{n:02}" for n in range(7, 17)]


async def test_a_producer_waits_for_a_job_another_jobs_runs(jobs_dsn: str) -> None:
    """The web process waits; a worker elsewhere (here: another `Jobs` on the same store)."""
    shared = jobs_dsn if not jobs_dsn.startswith("memory") else "memory://shared-wait"
    async with Jobs(shared, queues={}) as producer, Jobs(shared, poll_interval=0.05):
        job_id = await gated.enqueue(n=17)
        waiting = asyncio.create_task(producer.wait(job_id, timeout=10))
        await asyncio.sleep(0.05)
        gates.setdefault(17, asyncio.Event()).set()
        async with asyncio.timeout(2):
            assert (await waiting).result == "2026-01-17"


async def test_a_jobs_that_stops_leaves_the_others_on_its_store_listening(
    jobs_dsn: str,
) -> None:
    """Stopping one `Jobs` closes its own connections only: a worker of another on the same
    database is still woken at once by an enqueue, and its waits still end."""
    async with Jobs(jobs_dsn, poll_interval=60) as worker:
        async with Jobs(jobs_dsn, queues={}):
            pass
        job_id = await gated.configure(jobs=worker).enqueue(n=27)
        gates.setdefault(27, asyncio.Event()).set()
        async with asyncio.timeout(5):  # not the 60 s poll: the enqueue woke the worker
            assert (await worker.wait(job_id)).status is JobStatus.SUCCEEDED


# -- events ------------------------------------------------------------------------------------


async def test_events_tell_each_change_in_order(jobs: Jobs) -> None:
    job_id = await gated.enqueue(n=20, fail_first=True)
    gates.setdefault(20, asyncio.Event()).set()
    record = await jobs.wait(job_id, timeout=10)
    events = await jobs.events(job_id)
    assert kinds(events) == [
        EventKind.ENQUEUED,
        EventKind.CLAIMED,
        EventKind.ATTEMPT_FAILED,
        EventKind.CLAIMED,
        EventKind.SUCCEEDED,
    ]
    assert [e.attempt for e in events] == [0, 1, 1, 2, 2]
    assert "ValueError: first try" in (events[2].error or "")
    assert [e.at for e in events] == sorted(e.at for e in events)
    assert events[0].at == record.created_at
    assert events[-1].status is JobStatus.SUCCEEDED
    assert events[-1].at == record.finished_at
    assert all(e.job_id == job_id for e in events)


async def test_with_events_off_only_what_the_job_row_says_is_told(jobs_dsn: str) -> None:
    """The enqueueing, and of a job that succeeded its last attempt's claim and success: all
    read from the job row, which nothing changes after a success."""
    async with Jobs(jobs_dsn, poll_interval=0.05, events=False) as quiet:
        job_id = await gated.enqueue(n=21, fail_first=True)
        cancelled = await failing.enqueue(n=22)
        assert await quiet.cancel(cancelled)
        gates.setdefault(21, asyncio.Event()).set()
        record = await quiet.wait(job_id, timeout=10)
        assert (record.status, record.attempts) == (JobStatus.SUCCEEDED, 2)
        told = await quiet.events(job_id)
        assert [(e.kind, e.attempt) for e in told] == [
            (EventKind.ENQUEUED, 0),
            (EventKind.CLAIMED, 2),
            (EventKind.SUCCEEDED, 2),
        ]
        assert (told[1].at, told[2].at) == (record.started_at, record.finished_at)
        assert kinds(await quiet.events(cancelled)) == [EventKind.ENQUEUED]
        assert quiet._ready_store.record_events is False


@pytest.mark.parametrize("quiet_first", [False, True])
async def test_each_jobs_on_one_store_records_events_as_its_own_setting_says(
    jobs_dsn: str, quiet_first: bool
) -> None:
    """Two `Jobs` on one database (on memory: one named store), whichever started last: the
    writes of each follow its own `events`, as each has its own connections on PostgreSQL."""
    loud = Jobs(jobs_dsn, poll_interval=0.05)
    quiet = Jobs(jobs_dsn, queues={}, events=False)
    first, second = (quiet, loud) if quiet_first else (loud, quiet)
    async with first, second:
        ran = await failing.configure(jobs=quiet).enqueue(n=24)
        await loud.wait(ran, timeout=10)  # claimed and failed by loud's worker
        told = await failing.configure(jobs=loud, delay=3600).enqueue(n=25)
        untold = await failing.configure(jobs=quiet, delay=3600).enqueue(n=26)
        assert await loud.cancel(told)
        assert await quiet.cancel(untold)
        assert kinds(await quiet.events(ran)) == [
            EventKind.ENQUEUED,
            EventKind.CLAIMED,
            EventKind.FAILED,
        ]
        assert kinds(await quiet.events(told)) == [EventKind.ENQUEUED, EventKind.CANCELLED]
        assert kinds(await loud.events(untold)) == [EventKind.ENQUEUED]


async def test_an_unknown_jobs_history_is_empty(jobs: Jobs) -> None:
    assert await jobs.events(10**9) == []
    not_an_id: Any = "not an id"
    assert await jobs.events(not_an_id) == []


async def test_pruning_a_job_removes_its_events(jobs: Jobs) -> None:
    job_id = await failing.enqueue(n=23)
    await jobs.wait(job_id, timeout=10)
    assert len(await jobs.events(job_id)) == 3
    await asyncio.sleep(0.02)
    assert (await jobs._ready_store.prune_finished(0.01, 100)).deleted == 1
    assert await jobs.events(job_id) == []


# -- peek --------------------------------------------------------------------------------------


async def test_peek_lists_what_the_next_claim_takes_and_changes_nothing(jobs_dsn: str) -> None:
    async with Jobs(jobs_dsn, queues={}) as producer:
        low = await failing.enqueue(n=30)
        high = await failing.configure(priority=5).enqueue(n=31)
        await failing.configure(delay=3600).enqueue(n=32)  # not due
        await failing.configure(queue="other").enqueue(n=33)
        low_too = await failing.enqueue(n=34)
        before = [await producer.events(i) for i in (low, high, low_too)]
        counts = await producer.count_by_status()

        not_an_id: Any = "x"
        peeked = await producer.peek("default", 10)
        assert [r.id for r in peeked] == [high, low, low_too]
        assert [r.id for r in await producer.peek("default", 2)] == [high, low]
        assert [r.id for r in await producer.peek(limit=10, exclude=[high, not_an_id])] == [
            low,
            low_too,
        ]
        assert [r.id for r in await producer.peek("nobody")] == []
        assert all(r.status is JobStatus.PENDING for r in peeked)
        assert [await producer.events(i) for i in (low, high, low_too)] == before
        assert await producer.count_by_status() == counts
        with pytest.raises(ValueError, match="limit must be an integer from 1 to 10000"):
            await producer.peek("default", 0)

        claimed = await producer._ready_store.claim_batch("default", 2, "w", 30.0)
        assert sorted(c.id for c in claimed) == sorted([high, low])
