"""Enqueue, run, and look at jobs through the public API, on a real PostgreSQL."""

from __future__ import annotations

import asyncio
import math
import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import pytest

from starlette_jobs import (
    DatabaseUnavailableError,
    JobArgumentsError,
    JobNotFoundError,
    JobStatus,
    Retry,
    UnknownJobError,
    current_job,
    job,
)
from tests.conftest import StartJobs, eventually, on_postgres
from tests.records import new_jobs

ran: list[Any] = []


@job(retry=Retry.none())
async def record(value: int, label: str = "x") -> dict[str, Any]:
    running = current_job()
    assert running is not None
    ran.append((value, label, running.attempt))
    return {"doubled": value * 2}


@job(queue="other", retry=Retry.none())
def record_sync(value: int) -> int:
    ran.append(("sync", value))
    return value


@pytest.fixture(autouse=True)
def _clear_ran() -> None:
    ran.clear()


async def count_rows(connection: asyncpg.Connection[Any]) -> int:
    rows: int = await connection.fetchval("SELECT count(*) FROM starlette_jobs")
    return rows


async def test_an_enqueued_job_runs_and_its_result_is_kept(start_jobs: StartJobs) -> None:
    async with start_jobs() as jobs:
        job_id = await record.enqueue(21, label="hello")
        await jobs.drain(timeout=10)
        stored = await jobs.get(job_id)
    assert stored is not None
    assert (stored.status, stored.attempts, stored.result) == (
        JobStatus.SUCCEEDED,
        1,
        {"doubled": 42},
    )
    assert stored.arguments == {"value": 21, "label": "hello"}
    assert stored.started_at is not None
    assert stored.finished_at is not None
    assert ran == [(21, "hello", 1)]


async def test_sync_functions_run_in_a_thread(start_jobs: StartJobs) -> None:
    async with start_jobs(queues={"other": 2}) as jobs:
        job_id = await record_sync.enqueue(value=5)
        await jobs.drain(timeout=10)
        stored = await jobs.get(job_id)
    assert stored is not None
    assert stored.status == JobStatus.SUCCEEDED
    assert stored.result == 5


async def test_bad_arguments_write_no_row(
    start_jobs: StartJobs, connection: asyncpg.Connection[Any]
) -> None:
    async with start_jobs(queues={}) as jobs:
        with pytest.raises(JobArgumentsError):
            await record.enqueue(value="many")  # type: ignore[arg-type]
        with pytest.raises(JobArgumentsError):
            await jobs.enqueue(record, value=1, unknown=2)
        with pytest.raises(JobArgumentsError):
            await record.enqueue(value=math.inf)  # type: ignore[arg-type]
        with pytest.raises(JobArgumentsError) as caught:
            await record.enqueue_many([{"value": 1}, {"value": "bad"}, {"value": 3}])
    assert caught.value.errors[0]["loc"] == (1, "value")
    assert await count_rows(connection) == 0


async def test_enqueue_many_writes_all_in_order(start_jobs: StartJobs) -> None:
    async with start_jobs() as jobs:
        ids = await jobs.enqueue_many(record, [{"value": n} for n in range(50)])
        assert ids == sorted(ids)
        assert len(set(ids)) == 50
        assert await record.enqueue_many([]) == []
        for n, job_id in enumerate(ids):
            stored = await jobs.get(job_id)
            assert stored is not None
            assert stored.arguments == {"value": n}
        await jobs.drain(timeout=10)
        first = await jobs.get(ids[0])
        assert first is not None
        assert first.arguments == {"value": 0}
    assert sorted(value for value, *_ in ran) == list(range(50))


async def test_concurrent_enqueues_all_land(start_jobs: StartJobs) -> None:
    async with start_jobs(queues={}) as jobs:
        # One at a time they share the producer connection; at once, the others use the pool.
        ids = await asyncio.gather(*(record.enqueue(n) for n in range(30)))
        assert len(set(ids)) == 30
        stored = await jobs.list(limit=100)
        assert sorted(r.arguments["value"] for r in stored) == list(range(30))


def drop_connections_unnoticed(dsn: str, *keep: int) -> None:
    """Has the server drop every connection to the database but ours and `keep`'s, and wait
    until those backends are gone, all while this thread holds the event loop: the dropped
    connections cannot notice until their next use, as after a server restart."""

    async def drop() -> None:
        admin: asyncpg.Connection[Any] = await asyncpg.connect(dsn)
        others = (
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
            "AND pid <> pg_backend_pid() AND NOT pid = ANY($1::int[])"
        )
        try:
            await admin.execute(f"SELECT pg_terminate_backend(pid) FROM ({others}) o", keep)
            for _ in range(1000):
                if not await admin.fetch(others, keep):
                    break
                await asyncio.sleep(0.01)
            else:
                raise AssertionError("the terminated backends are still there after 10 s")
        finally:
            await admin.close()

    thread = threading.Thread(target=asyncio.run, args=(drop(),))
    thread.start()
    thread.join()  # blocks the loop on purpose


@pytest.mark.parametrize("first_call", ["get", "enqueue", "cancel"])
async def test_after_the_server_dropped_every_connection_only_the_first_write_fails(
    first_call: str,
    start_jobs: StartJobs,
    database_dsn: str,
    connection: asyncpg.Connection[Any],
) -> None:
    async with start_jobs(queues={}) as jobs:
        first = await record.enqueue(1)
        second = await record.enqueue(2)
        await asyncio.gather(*(jobs.get(first) for _ in range(5)))  # several pooled connections
        drop_connections_unnoticed(database_dsn, connection.get_server_pid())
        if first_call == "get":
            # A read is run again on a new connection: the caller never sees the drop.
            stored = await jobs.get(first)
            assert stored is not None
            assert stored.arguments == {"value": 1}
        else:
            # A write is not: had the server run it before dropping the connection, it would
            # be done twice. The caller is told, and may try again.
            with pytest.raises(DatabaseUnavailableError, match=f"could not {first_call}"):
                await (record.enqueue(100) if first_call == "enqueue" else jobs.cancel(first))
        # The call that found its connection dropped had every other one replaced: calls of
        # each kind (on the enqueue connection, the pool, reads and writes) work at once.
        last = await record.enqueue(101)
        assert await jobs.cancel(second)
        assert sorted(r.arguments["value"] for r in await jobs.list()) == [1, 2, 101]
        assert (await jobs.count_by_status())[JobStatus.CANCELLED] == 1
        stored = await jobs.get(last)
        assert stored is not None
        assert stored.status == JobStatus.PENDING


async def test_enqueue_by_name(start_jobs: StartJobs) -> None:
    async with start_jobs() as jobs:
        job_id = await jobs.enqueue("tests.integration.test_enqueue_and_run.record", value=3)
        await jobs.drain(timeout=10)
        stored = await jobs.get(job_id)
        with pytest.raises(UnknownJobError, match=r"no\.such\.job"):
            await jobs.enqueue("no.such.job")
    assert stored is not None
    assert stored.status == JobStatus.SUCCEEDED


async def test_with_no_grace_an_unknown_job_name_in_a_row_fails_at_once_with_a_clear_error(
    start_jobs: StartJobs,
) -> None:
    # With the default grace it waits for a worker that declares it (deploy_aware_contract).
    async with start_jobs(unknown_job_grace=0) as jobs:
        [job_id] = await jobs._ready_store.insert_jobs(
            new_jobs(name="vanished.module.job", max_attempts=5)
        )
        await jobs.drain(timeout=10)
        stored = await jobs.get(job_id)
    assert stored is not None
    assert (stored.status, stored.attempts) == (JobStatus.FAILED, 1)
    assert stored.last_error is not None
    assert "no job named 'vanished.module.job' is registered" in stored.last_error


async def test_a_stored_payload_that_no_longer_validates_fails_with_the_validation_error(
    start_jobs: StartJobs,
) -> None:
    async with start_jobs() as jobs:
        [job_id] = await jobs._ready_store.insert_jobs(
            new_jobs(name=record.name, payload='{"value": "forty"}', max_attempts=5)
        )
        await jobs.drain(timeout=10)
        stored = await jobs.get(job_id)
    assert stored is not None
    assert stored.status == JobStatus.FAILED
    assert stored.last_error is not None
    assert "value" in stored.last_error
    assert "valid integer" in stored.last_error
    assert ran == []


async def test_a_notify_wakes_an_idle_worker_long_before_its_poll(start_jobs: StartJobs) -> None:
    async with start_jobs(poll_interval=3600) as jobs:
        await jobs.drain(timeout=5)  # the worker is up and idle
        job_id = await record.enqueue(value=1)
        await jobs.drain(timeout=10)
        stored = await jobs.get(job_id)
    assert stored is not None
    assert stored.status == JobStatus.SUCCEEDED


async def test_priority_then_run_at_order_the_claims(start_jobs: StartJobs) -> None:
    async with start_jobs(queues={}) as producer:
        await record.configure(priority=0).enqueue(value=1)
        await record.configure(priority=10).enqueue(value=2)
        await record.configure(priority=-5).enqueue(value=3)
        await record.configure(priority=10).enqueue(value=4)
        async with start_jobs(queues={"default": 1}) as worker:
            await worker.drain(timeout=10)
    assert [value for value, *_ in ran] == [2, 4, 1, 3]
    assert producer.config.queues == {}


async def test_delay_and_run_at_hold_a_job_back(start_jobs: StartJobs) -> None:
    async with start_jobs() as jobs:
        later = await record.configure(delay=3600).enqueue(value=1)
        future = datetime.now(UTC) + timedelta(hours=1)
        at = await record.configure(run_at=future).enqueue(value=2)
        soon = await record.configure(delay=0.2).enqueue(value=3)
        await jobs.drain(timeout=10)
        statuses = [(await jobs.get(i)).status for i in (later, at, soon)]  # type: ignore[union-attr]
        scheduled = await jobs.get(at)
    assert statuses == [JobStatus.PENDING, JobStatus.PENDING, JobStatus.SUCCEEDED]
    assert scheduled is not None
    assert abs(scheduled.run_at - future) < timedelta(milliseconds=1)


async def test_queue_option_sends_a_job_elsewhere(start_jobs: StartJobs) -> None:
    async with start_jobs(queues={"elsewhere": 1}) as jobs:
        moved = await record.configure(queue="elsewhere").enqueue(value=9)
        stays = await record.enqueue(value=10)
        await jobs.drain(timeout=10)
        moved_job, stayed_job = await jobs.get(moved), await jobs.get(stays)
    assert moved_job is not None
    assert moved_job.queue == "elsewhere"
    assert moved_job.status == JobStatus.SUCCEEDED
    assert stayed_job is not None
    assert stayed_job.status == JobStatus.PENDING


async def test_an_enqueue_on_a_connection_joins_its_transaction(
    start_jobs: StartJobs, connection: asyncpg.Connection[Any]
) -> None:
    async with start_jobs(queues={}) as jobs:
        tx = connection.transaction()
        await tx.start()
        rolled_back = await record.configure(connection=connection).enqueue(value=1)
        await tx.rollback()
        async with connection.transaction():
            committed = await record.configure(connection=connection).enqueue(value=2)
            # The id comes back before the caller's transaction commits (docs/reliability.md):
            # until it does, nobody else sees the job.
            assert await jobs.get(committed) is None
        assert await jobs.get(rolled_back) is None
        assert await jobs.get(committed) is not None


async def test_a_unique_key_keeps_one_live_job(start_jobs: StartJobs) -> None:
    async with start_jobs(queues={}) as jobs:
        first = await record.configure(unique_key="user-7").enqueue(value=1)
        second = await record.configure(unique_key="user-7").enqueue(value=2)
        other = await record.configure(unique_key="user-8").enqueue(value=3)
        assert first == second != other
        assert (await jobs.count_by_status())[JobStatus.PENDING] == 2


async def test_list_count_cancel_and_retry(start_jobs: StartJobs) -> None:
    async with start_jobs(queues={}) as producer:
        ids = [await record.enqueue(value=n) for n in range(3)]
        other = await record_sync.enqueue(value=1)
        assert await producer.cancel(ids[0]) is True
        assert await producer.cancel(ids[0]) is False  # already cancelled
        with pytest.raises(JobNotFoundError):
            await producer.cancel(10**12)
        counts = await producer.count_by_status()
        assert counts == {
            JobStatus.PENDING: 3,
            JobStatus.RUNNING: 0,
            JobStatus.SUCCEEDED: 0,
            JobStatus.FAILED: 0,
            JobStatus.CANCELLED: 1,
            JobStatus.WAITING: 0,
        }
        assert (await producer.count_by_status(queue="other"))[JobStatus.PENDING] == 1
        listed = await producer.list(limit=10)
        assert [j.id for j in listed] == [other, *reversed(ids)]
        assert [j.id for j in await producer.list(status="cancelled")] == [ids[0]]
        assert [j.id for j in await producer.list(queue="other")] == [other]

        assert await producer.retry(ids[1]) is False  # pending: nothing to retry
        assert await producer.retry(ids[0]) is True
        async with start_jobs() as worker:
            await worker.drain(timeout=10)
        retried = await producer.get(ids[0])
        assert retried is not None
        assert retried.status == JobStatus.SUCCEEDED
        with pytest.raises(JobNotFoundError):
            await producer.retry(10**12)


async def test_sql_looking_text_is_stored_verbatim(start_jobs: StartJobs) -> None:
    text = "'); DROP TABLE starlette_jobs; -- $1 \\x00"
    async with start_jobs(queues={}) as jobs:
        job_id = await record.configure(unique_key=text).enqueue(value=1, label=text)
        stored = await jobs.get(job_id)
    assert stored is not None
    assert stored.arguments["label"] == text


async def test_jobs_started_twice_is_refused(start_jobs: StartJobs) -> None:
    async with start_jobs(queues={}) as jobs:
        with pytest.raises(RuntimeError, match="already started"):
            await jobs.__aenter__()


async def test_concurrent_enqueues_from_many_tasks(start_jobs: StartJobs) -> None:
    async with start_jobs() as jobs:
        ids = await asyncio.gather(*(record.enqueue(value=n) for n in range(100)))
        await jobs.drain(timeout=20)
        counts = await jobs.count_by_status()
    assert len(set(ids)) == 100
    assert counts[JobStatus.SUCCEEDED] == 100


async def test_concurrent_enqueues_with_one_unique_key_all_get_the_same_id(
    start_jobs: StartJobs,
) -> None:
    async with start_jobs(queues={}, pool_max_size=10):
        for round_number in range(5):
            key = f"race-{round_number}"
            ids = await asyncio.gather(
                *(record.configure(unique_key=key).enqueue(value=n) for n in range(8))
            )
            assert None not in ids
            assert len(set(ids)) == 1


async def test_unique_key_with_enqueue_many_is_refused(start_jobs: StartJobs) -> None:
    from starlette_jobs import JobDefinitionError

    async with start_jobs(queues={}):
        with pytest.raises(JobDefinitionError, match="unique_key"):
            await record.configure(unique_key="k").enqueue_many([{"value": 1}, {"value": 2}])


async def test_a_job_may_enqueue_another_while_the_worker_shuts_down(
    start_jobs: StartJobs,
) -> None:
    started, release = asyncio.Event(), asyncio.Event()
    enqueued: list[int] = []

    @job(retry=Retry.none())
    async def chain() -> None:
        started.set()
        await release.wait()
        enqueued.append(await record.enqueue(value=1))

    async with start_jobs(shutdown_grace=10):
        job_id = await chain.enqueue()
        await asyncio.wait_for(started.wait(), timeout=10)
        # Let it finish only once the shutdown has begun.
        asyncio.get_running_loop().call_later(0.1, release.set)
    async with start_jobs(queues={}) as reader:
        stored = await reader.get(job_id)
        assert stored is not None
        assert stored.status == JobStatus.SUCCEEDED
        assert len(enqueued) == 1
        assert await reader.get(enqueued[0]) is not None


async def test_retrying_a_job_whose_unique_key_is_taken_says_so(start_jobs: StartJobs) -> None:
    from starlette_jobs import UniqueKeyTakenError

    async with start_jobs(queues={}) as jobs:
        first = await record.configure(unique_key="k").enqueue(value=1)
        assert await jobs.cancel(first)
        await record.configure(unique_key="k").enqueue(value=2)  # the key is free again
        with pytest.raises(UniqueKeyTakenError, match="unique key"):
            await jobs.retry(first)


async def test_a_statement_cancelled_on_a_connection_of_its_own_leaves_the_next_one_working(
    start_jobs: StartJobs, connection: asyncpg.Connection[Any]
) -> None:
    async def sleeping() -> bool:
        found: bool = await connection.fetchval(
            "SELECT count(*) > 0 FROM pg_stat_activity WHERE datname = current_database()"
            " AND state = 'active' AND query = 'SELECT pg_sleep(5)'"
        )
        return found

    async with start_jobs(queues={}) as jobs:
        lane = on_postgres(jobs)._producer
        slow = asyncio.create_task(lane.fetchval("SELECT pg_sleep(5)"))
        await eventually(sleeping, "the statement to run on the server")
        slow.cancel()
        with pytest.raises(asyncio.CancelledError):
            await slow
        assert await lane.fetchval("SELECT 41 + 1") == 42
        job_id = await record.enqueue(7)
        stored = await jobs.get(job_id)
        assert stored is not None
        assert stored.arguments == {"value": 7}
