"""`_waiting`: `jobs.wait` and `jobs.result`, and the shared listener behind them: one watch per
job however many wait, nothing left behind by a waiter that leaves, a lost announcement or a
dropped listener covered by the re-check. What both stores share is in
contract/test_lifecycle_contract.py; a worker in another process, in processes/test_waiting.py."""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator, Awaitable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg
import pytest

from starlette_jobs import (
    JobCancelledError,
    JobFailedError,
    JobNotFoundError,
    JobResultError,
    Jobs,
    JobStatus,
    NotStartedError,
    Retry,
    job,
)
from starlette_jobs._errors import last_line
from starlette_jobs._waiting import OutcomeWaiters, _result_adapter
from starlette_jobs.postgres._migrations import queries
from starlette_jobs.postgres._store import PostgresStore
from tests.conftest import eventually
from tests.records import new_jobs as new
from tests.records import outcome as ended

gates: dict[int, asyncio.Event] = {}


def gate(n: int) -> asyncio.Event:
    return gates.setdefault(n, asyncio.Event())


@pytest.fixture(autouse=True)
def _fresh_gates() -> None:
    gates.clear()


@job(retry=Retry.none())
async def held(n: int) -> int:
    """Returns `n * 2` once the test opens its gate."""
    await gate(n).wait()
    return n * 2


@dataclass
class Thumbnail:
    width: int
    made_at: datetime


@job
async def thumbnail(width: int) -> Thumbnail:
    return Thumbnail(width, datetime.fromisoformat("2026-01-02T03:04:05+00:00"))


@job
def counted(n: int) -> list[int]:  # a sync job: the annotation is what the function returns
    return list(range(n))


@job(retry=Retry.none())
async def says_it_is_an_int(n: int) -> int:
    bad: Any = f"not {n}"
    return bad  # type: ignore[no-any-return]


@job(retry=Retry.none())
async def broken(n: int) -> int:
    raise LookupError(f"nothing for {n}")


@pytest.fixture
async def jobs(jobs_memory: str) -> AsyncIterator[Jobs]:
    async with Jobs(jobs_memory, poll_interval=0.05) as started:
        yield started


async def test_a_wait_returns_the_record_once_the_job_finishes(jobs: Jobs) -> None:
    job_id = await held.enqueue(n=4)
    waiting = asyncio.create_task(jobs.wait(job_id, timeout=10))
    await asyncio.sleep(0)
    assert not waiting.done()
    gate(4).set()
    record = await waiting
    assert (record.id, record.status, record.result) == (job_id, JobStatus.SUCCEEDED, 8)
    assert record.finished
    assert jobs._ready_waiters.watched == 0


async def test_a_job_finished_before_the_wait_is_returned_at_once(jobs: Jobs) -> None:
    job_id = await held.enqueue(n=1)
    gate(1).set()
    await jobs.drain(timeout=10)
    async with asyncio.timeout(1):
        from_a_url: Any = str(job_id)
        record = await jobs.wait(from_a_url, timeout=10)
    assert record.status is JobStatus.SUCCEEDED


@pytest.mark.parametrize("job_id", [10**6, -1, 0, "abc", "", 2**63, True, None, 1.0])
async def test_waiting_for_what_no_job_is_raises_not_found(jobs: Jobs, job_id: Any) -> None:
    with pytest.raises(JobNotFoundError, match="no job with id"):
        await jobs.wait(job_id, timeout=1)
    with pytest.raises(JobNotFoundError, match="no job with id"):
        await jobs.result(held, job_id, timeout=1)
    assert jobs._ready_waiters.watched == 0


async def test_a_wait_times_out_with_the_job_left_as_it_is(jobs: Jobs) -> None:
    job_id = await held.enqueue(n=2)
    loop = asyncio.get_running_loop()
    started = loop.time()
    with pytest.raises(TimeoutError, match=rf"job {job_id} did not finish within 0.2 s"):
        await jobs.wait(job_id, timeout=0.2)
    assert 0.2 <= loop.time() - started < 1.0
    assert jobs._ready_waiters.watched == 0
    gate(2).set()  # the job goes on, and a later wait gets it
    assert (await jobs.wait(job_id, timeout=10)).result == 4


async def test_the_timeout_message_says_what_the_job_is_doing(jobs_memory: str) -> None:
    async with Jobs(jobs_memory, queues={}) as producer:
        job_id = await held.enqueue(n=3)
        with pytest.raises(TimeoutError, match=r"within 0.05 s \(it is pending\)"):
            await producer.wait(job_id, timeout=0.05)


@pytest.mark.parametrize("timeout", [-1, math.nan, True, "1"])
async def test_a_timeout_that_is_not_a_duration_is_refused(jobs: Jobs, timeout: Any) -> None:
    with pytest.raises(ValueError, match="timeout must be a number of seconds >= 0"):
        await jobs.wait(1, timeout=timeout)
    with pytest.raises(ValueError, match="timeout must be a number of seconds >= 0"):
        await jobs.result(held, 1, timeout=timeout)


async def test_an_infinite_timeout_waits_as_long_as_it_takes(jobs: Jobs) -> None:
    job_id = await held.enqueue(n=5)
    waiting = asyncio.create_task(jobs.wait(job_id, timeout=math.inf))
    await asyncio.sleep(0.05)
    gate(5).set()
    assert (await waiting).result == 10


async def test_many_waiters_on_one_job_share_one_watch(jobs: Jobs) -> None:
    job_id = await held.enqueue(n=6)
    waiters = [asyncio.create_task(jobs.wait(job_id, timeout=10)) for _ in range(50)]
    await asyncio.sleep(0.01)
    assert jobs._ready_waiters.watched == 1
    gate(6).set()
    records = await asyncio.gather(*waiters)
    assert {record.result for record in records} == {12}
    assert jobs._ready_waiters.watched == 0


async def test_a_cancelled_waiter_leaves_nothing_behind_and_others_still_get_the_job(
    jobs: Jobs,
) -> None:
    job_id = await held.enqueue(n=7)
    leaving = asyncio.create_task(jobs.wait(job_id, timeout=10))
    staying = asyncio.create_task(jobs.wait(job_id, timeout=10))
    await asyncio.sleep(0.01)
    leaving.cancel()
    with pytest.raises(asyncio.CancelledError):
        await leaving
    assert jobs._ready_waiters.watched == 1
    gate(7).set()
    assert (await staying).result == 14
    assert jobs._ready_waiters.watched == 0

    other = await held.enqueue(n=8)
    alone = asyncio.create_task(jobs.wait(other, timeout=10))
    await asyncio.sleep(0.01)
    alone.cancel()
    with pytest.raises(asyncio.CancelledError):
        await alone
    assert jobs._ready_waiters.watched == 0
    assert not [t for t in asyncio.all_tasks() if t.get_name().startswith("starlette_jobs wait")]
    gate(8).set()


async def test_stopping_jobs_ends_the_waits_with_a_clear_error(jobs_memory: str) -> None:
    async with Jobs(jobs_memory, queues={}) as producer:
        job_id = await held.enqueue(n=9)
        waiting = asyncio.create_task(producer.wait(job_id, timeout=10))
        await asyncio.sleep(0.01)
    with pytest.raises(NotStartedError, match=f"Jobs stopped while waiting for job {job_id}"):
        await waiting
    with pytest.raises(NotStartedError, match="Jobs is not started"):
        await producer.wait(job_id, timeout=1)


async def test_a_job_retried_after_it_finished_is_waited_for_again(jobs: Jobs) -> None:
    job_id = await broken.enqueue(n=1)
    failed = await jobs.wait(job_id, timeout=10)
    assert failed.status is JobStatus.FAILED
    assert await jobs.retry(job_id)
    again = await jobs.wait(job_id, timeout=10)
    assert (again.status, len(again.errors)) == (JobStatus.FAILED, 2)


# -- result: the job's own return type -----------------------------------------------------------


async def test_a_result_comes_back_as_the_functions_return_type(jobs: Jobs) -> None:
    made = await jobs.result(thumbnail, await thumbnail.enqueue(width=64), timeout=10)
    assert made == Thumbnail(64, datetime.fromisoformat("2026-01-02T03:04:05+00:00"))
    assert await jobs.result(counted, await counted.enqueue(n=3), timeout=10) == [0, 1, 2]


async def test_the_validator_is_built_once_per_job() -> None:
    assert _result_adapter(thumbnail) is _result_adapter(thumbnail)
    assert _result_adapter(counted).validate_python([1]) == [1]


async def test_a_failed_job_raises_with_its_last_error(jobs: Jobs) -> None:
    job_id = await broken.enqueue(n=3)
    with pytest.raises(JobFailedError) as failed:
        await jobs.result(broken, job_id, timeout=10)
    assert failed.value.record.id == job_id
    assert failed.value.record.status is JobStatus.FAILED
    assert failed.value.last_error is not None
    assert "LookupError: nothing for 3" in failed.value.last_error
    assert str(failed.value).endswith("failed after 1 attempt(s): LookupError: nothing for 3")


async def test_a_cancelled_job_raises_with_its_record(jobs_memory: str) -> None:
    async with Jobs(jobs_memory, queues={}) as producer:
        job_id = await held.enqueue(n=10)
        assert await producer.cancel(job_id)
        with pytest.raises(JobCancelledError, match=f"job {job_id} .* was cancelled") as cancelled:
            await producer.result(held, job_id, timeout=10)
    assert cancelled.value.record.status is JobStatus.CANCELLED
    assert (cancelled.value.record.result, cancelled.value.last_error) == (None, None)


async def test_a_result_that_does_not_fit_the_annotation_is_refused(jobs: Jobs) -> None:
    job_id = await says_it_is_an_int.enqueue(n=1)
    with pytest.raises(JobResultError, match="does not match its return type") as refused:
        await jobs.result(says_it_is_an_int, job_id, timeout=10)
    assert refused.value.record.result == "not 1"
    assert refused.value.errors[0]["type"] == "int_parsing"


async def test_the_id_of_another_jobs_job_is_not_found(jobs: Jobs) -> None:
    job_id = await broken.enqueue(n=1)
    with pytest.raises(JobNotFoundError, match=f"job {job_id} is a job of '.*broken', not of"):
        await jobs.result(held, job_id, timeout=10)


def test_a_tracebacks_last_line_names_the_error() -> None:
    assert last_line("Traceback ...\n  File x\nValueError: bad\n") == "ValueError: bad"
    assert last_line(None) == last_line("") == last_line("\n") == ""


# -- on PostgreSQL: what the re-check covers ---------------------------------------------------


@pytest.fixture
async def store(database_dsn: str) -> AsyncIterator[PostgresStore]:
    opened = await PostgresStore.open(database_dsn, min_size=1, max_size=2)
    yield opened
    await opened.close()


async def test_a_job_finished_without_announcement_is_found_by_the_recheck(
    store: PostgresStore, connection: asyncpg.Connection[Any]
) -> None:
    [job_id] = await store.insert_jobs(new())
    waiters = OutcomeWaiters(store, recheck_interval=0.1)
    try:
        waiting = asyncio.create_task(waiters.finished_status(job_id, 10))
        await asyncio.sleep(0.05)
        # An operator's own statement: it sends no NOTIFY.
        await connection.execute(
            "UPDATE starlette_jobs SET status = 'succeeded', finished_at = now() WHERE id = $1",
            job_id,
        )
        async with asyncio.timeout(2):
            assert await waiting is JobStatus.SUCCEEDED
    finally:
        await waiters.close()


async def test_a_dropped_listener_is_reopened_and_the_wait_still_ends(
    store: PostgresStore, connection: asyncpg.Connection[Any]
) -> None:
    [job_id] = await store.insert_jobs(new())
    [claim] = await store.claim_batch("default", 1, "w", 30.0)
    waiters = OutcomeWaiters(store, recheck_interval=0.1)

    async def listener_pids() -> list[int]:
        # Listeners that have run their LISTEN: a backend shows in pg_stat_activity as soon as
        # it starts, and one ended before its LISTEN is a wait's first look failing (it raises
        # `DatabaseUnavailableError`, nothing to reopen), not a listener dropped under a wait.
        return [
            row["pid"]
            for row in await connection.fetch(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
                "AND application_name = 'starlette_jobs listen' AND query <> ''"
            )
        ]

    try:
        waiting = asyncio.create_task(waiters.finished_status(job_id, 10))
        await eventually(lambda: _one(listener_pids()), "the listener")
        [first] = await listener_pids()
        await connection.execute("SELECT pg_terminate_backend($1)", first)

        async def reopened() -> bool:
            return (await listener_pids()) not in ([], [first])

        await eventually(reopened, "the listener reopened")
        assert await store.record_outcomes([ended(claim, JobStatus.SUCCEEDED)]) == {job_id}
        async with asyncio.timeout(0.09):  # the announcement, not the next re-check
            assert await waiting is JobStatus.SUCCEEDED
    finally:
        await waiters.close()


async def _one(pids: Awaitable[list[int]]) -> bool:
    return len(await pids) == 1


async def test_a_claim_that_skipped_a_job_a_waiter_had_locked_is_woken_again(
    store: PostgresStore, connection: asyncpg.Connection[Any]
) -> None:
    """`want_outcome` locks the job's row for its statement, and a claim at that moment skips
    it (SKIP LOCKED) and finds nothing: unless it is woken again, the job waits for the poll.
    The waiter's statement, held open here in a transaction, wakes the queue as it commits."""
    woken: list[str] = []
    listener = await store.listen(["default"], woken.append)
    try:
        [job_id] = await store.insert_jobs(new())
        await eventually(lambda: _true(woken == ["default"]), "the enqueue's notification")
        woken.clear()
        async with connection.transaction():
            status = await connection.fetchval(queries()["want_outcome"], job_id)
            assert status == "pending"
            assert await store.claim_batch("default", 1, "w", 30.0) == []  # skipped: locked
        await eventually(lambda: _true(woken == ["default"]), "the waiter's wake-up", timeout=2)
        assert [claim.id for claim in await store.claim_batch("default", 1, "w", 30.0)] == [job_id]
    finally:
        await listener.close()


async def _true(value: bool) -> bool:
    return value
