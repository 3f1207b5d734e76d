"""A job that writes its own success in the transaction that does its work
(`current_job().complete_in`, docs/transactions.md), on PostgreSQL and memory alike: its result
and its event are written, the steps waiting for it are released, the worker writes nothing more
for it, an attempt that lost its lease cannot complete (and, on PostgreSQL, nothing of its
transaction is written), and a second completion is refused.

On PostgreSQL the job completes inside a transaction of its own connection that also inserts a
row of the app's (`charges`); the in-memory store joins no transaction, so there the job
completes at once (`complete_in(None, ...)`), with the same fence."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any
from uuid import uuid4

import asyncpg
import pydantic
import pytest

from starlette_jobs import (
    EventKind,
    Jobs,
    JobStatus,
    LeaseLostError,
    RunningJob,
    Workflow,
    current_job,
    job,
)
from starlette_jobs.store._protocol import Store
from tests.records import new_jobs


class Receipt(pydantic.BaseModel):
    order_id: int
    cents: int


# What the jobs below reach: the test's database (None: the memory store, no transaction) and
# the hooks a test sets to act at a given moment of an attempt.
database: dict[str, str | None] = {"dsn": None}
before_completing: list[Callable[[], Awaitable[None]]] = []
errors: list[BaseException] = []
ran: list[str] = []


@pytest.fixture(autouse=True)
def _fresh(postgres_dsn: str | None) -> None:
    database["dsn"] = postgres_dsn
    before_completing.clear()
    errors.clear()
    ran.clear()


@pytest.fixture
def jobs_dsn(postgres_dsn: str | None) -> str:
    return postgres_dsn or "memory://"


@pytest.fixture
async def jobs(jobs_dsn: str, postgres_dsn: str | None) -> AsyncIterator[Jobs]:
    if postgres_dsn is not None:
        connection = await asyncpg.connect(postgres_dsn)
        await connection.execute("CREATE TABLE charges (order_id int NOT NULL)")
        await connection.close()
    async with Jobs(jobs_dsn, poll_interval=0.05, queues={"default": 5}) as started:
        yield started


@asynccontextmanager
async def transaction() -> AsyncIterator[asyncpg.Connection[Any] | None]:
    """The job's own transaction on the test's database; None on the memory store."""
    dsn = database["dsn"]
    if dsn is None:
        yield None
        return
    connection: asyncpg.Connection[Any] = await asyncpg.connect(dsn)
    try:
        async with connection.transaction():
            yield connection
    finally:
        await connection.close()


def me() -> RunningJob:
    running = current_job()
    assert running is not None
    return running


@job(name="owntx.charge")
async def charge(order_id: int) -> Receipt:
    receipt = Receipt(order_id=order_id, cents=100 * order_id)
    async with transaction() as connection:
        if connection is not None:
            await connection.execute("INSERT INTO charges (order_id) VALUES ($1)", order_id)
        if before_completing:
            await before_completing.pop(0)()
        try:
            await me().complete_in(connection, charge, receipt)
        except LeaseLostError as error:
            errors.append(error)
            raise
    ran.append(f"charged {order_id}")
    # What the job returns after `complete_in` is not written: the result is the one that
    # committed with its work.
    return Receipt(order_id=order_id, cents=-1)


@job(name="owntx.mail")
async def mail(order_id: int) -> str:
    receipt = await me().upstream_result("charge", Receipt)
    ran.append(f"mailed {receipt.cents}")
    return f"receipt for {receipt.cents} cents"


@job(name="owntx.twice")
async def twice() -> str:
    await me().complete_in(None, twice, "first")
    try:
        await me().complete_in(None, twice, "second")
    except LeaseLostError as error:
        errors.append(error)
    return "returned"


async def charges(postgres_dsn: str | None) -> list[int]:
    if postgres_dsn is None:
        return []
    connection = await asyncpg.connect(postgres_dsn)
    try:
        return [row[0] for row in await connection.fetch("SELECT order_id FROM charges")]
    finally:
        await connection.close()


async def test_its_result_and_its_event_are_written_and_the_worker_writes_nothing_more(
    jobs: Jobs, postgres_dsn: str | None, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="starlette_jobs")
    job_id = await charge.enqueue(order_id=7)
    assert await jobs.result(charge, job_id, timeout=10) == Receipt(order_id=7, cents=700)
    await jobs.drain(timeout=10)
    record = await jobs.get(job_id)
    assert record is not None
    assert (record.status, record.attempts, record.result) == (
        JobStatus.SUCCEEDED, 1, {"order_id": 7, "cents": 700},
    )  # fmt: skip
    assert [event.kind for event in await jobs.events(job_id)] == [
        EventKind.ENQUEUED, EventKind.CLAIMED, EventKind.SUCCEEDED,
    ]  # fmt: skip
    assert ran == ["charged 7"]
    assert await charges(postgres_dsn) == ([7] if postgres_dsn else [])
    # No write refused by the fence, no lease taken for lost: the worker knew it was done.
    assert not [m for m in caplog.messages if "not recorded" in m or "no longer holds" in m]


async def test_the_steps_waiting_for_it_are_released_with_its_result(jobs: Jobs) -> None:
    flow = Workflow("paid")
    paid = flow.add("charge", charge, order_id=3)
    flow.after(paid).add("mail", mail, order_id=3)
    enqueued = await flow.enqueue(jobs=jobs)
    await jobs.drain(timeout=10)
    shown = await jobs.workflow(enqueued.id)
    assert shown is not None
    assert [(s.step, s.status) for s in shown.steps] == [
        ("charge", JobStatus.SUCCEEDED), ("mail", JobStatus.SUCCEEDED),
    ]  # fmt: skip
    assert shown["mail"].result == "receipt for 300 cents"
    # The step is released when the charge's transaction commits: it may run before the charge's
    # function, back from `complete_in`, notes that it ran.
    assert sorted(ran) == ["charged 3", "mailed 300"]


async def test_an_attempt_that_lost_its_lease_cannot_complete_and_writes_nothing(
    jobs: Jobs, postgres_dsn: str | None
) -> None:
    """The first attempt is released by an operator while it works (as a rescue would take it
    after its lease expired): another attempt runs and completes, and when the first one
    tries to complete, it gets `LeaseLostError` and its transaction writes nothing."""
    released = asyncio.Event()
    second_done = asyncio.Event()

    async def wait_for_the_other_attempt() -> None:
        released.set()
        await second_done.wait()

    before_completing.append(wait_for_the_other_attempt)
    job_id = await charge.enqueue(order_id=5)
    await asyncio.wait_for(released.wait(), 10)
    assert await jobs.release(job_id)
    assert await jobs.result(charge, job_id, timeout=10) == Receipt(order_id=5, cents=500)
    second_done.set()
    await jobs.drain(timeout=10)
    assert [type(error) for error in errors] == [LeaseLostError]
    record = await jobs.get(job_id)
    assert record is not None
    assert (record.status, record.result) == (JobStatus.SUCCEEDED, {"order_id": 5, "cents": 500})
    kinds = [event.kind for event in await jobs.events(job_id)]
    assert kinds.count(EventKind.SUCCEEDED) == 1
    # The row of the attempt that lost its lease was never committed; the other's was, once.
    assert await charges(postgres_dsn) == ([5] if postgres_dsn else [])
    assert ran == ["charged 5"]


async def test_a_second_completion_is_refused(jobs: Jobs) -> None:
    job_id = await twice.enqueue()
    await jobs.drain(timeout=10)
    record = await jobs.get(job_id)
    assert record is not None
    assert (record.status, record.result) == (JobStatus.SUCCEEDED, "first")
    assert [type(error) for error in errors] == [LeaseLostError]
    assert "completed already" in str(errors[0])


async def test_the_store_refuses_a_stale_lease_token_and_writes_nothing(store: Store) -> None:
    [job_id] = await store.insert_jobs(new_jobs())
    (claim,) = await store.claim_batch("default", 1, "w", 30)
    with pytest.raises(LeaseLostError, match=f"job {job_id}: its success was not written"):
        await store.complete_job(job_id, uuid4(), '"stale"')
    assert await store.release_job(job_id)  # the attempt loses its job
    with pytest.raises(LeaseLostError):
        await store.complete_job(job_id, claim.lease_token, '"late"')
    record = await store.get_job(job_id)
    assert record is not None
    assert (record.status, record.result) == (JobStatus.PENDING, None)
    kinds = [event.kind for event in await store.job_events(job_id)]
    assert EventKind.SUCCEEDED not in kinds


@job(name="owntx.linger")
async def linger(order_id: int, renewals: int) -> str:
    """Completes, then goes on working past `renewals` lease renewals (clean-up, say)."""
    async with transaction() as connection:
        await me().complete_in(connection, linger, f"done {order_id}")
    for _ in range(renewals):
        await asyncio.sleep(0.1)  # the job's own work: the heartbeat runs every 0.1 s
    ran.append(f"lingered {order_id}")
    return "returned"


async def test_the_end_of_its_lease_after_completing_is_not_taken_for_a_loss(
    jobs_dsn: str, postgres_dsn: str | None, caplog: pytest.LogCaptureFixture
) -> None:
    """After `complete_in` its lease token holds the job no more: the heartbeat must not cancel
    the attempt for it, nor warn of a lost lease."""
    if postgres_dsn is not None:
        connection = await asyncpg.connect(postgres_dsn)
        await connection.execute("CREATE TABLE charges (order_id int NOT NULL)")
        await connection.close()
    async with Jobs(jobs_dsn, poll_interval=0.05, lease_duration=0.3) as jobs:
        job_id = await linger.enqueue(order_id=1, renewals=5)
        await jobs.drain(timeout=10)
        record = await jobs.get(job_id)
    assert record is not None
    assert (record.status, record.result) == (JobStatus.SUCCEEDED, "done 1")
    assert ran == ["lingered 1"]
    assert not [m for m in caplog.messages if "no longer holds" in m or "not recorded" in m]
