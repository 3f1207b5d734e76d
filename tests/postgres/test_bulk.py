"""Bulk actions on PostgreSQL (`postgres/_bulk.py`) where only PostgreSQL can tell: a batch
locks its jobs without waiting, so a job another transaction holds neither fails the action
nor deadlocks it with a worker's outcome; a later batch takes it. What both stores share:
contract/test_bulk_contract.py."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest

from starlette_jobs import DatabaseUnavailableError, Jobs, JobStatus
from starlette_jobs._bulk_records import BulkFilter
from starlette_jobs._workflow_records import NewStep, NewWorkflow
from starlette_jobs.postgres._store import PostgresStore
from tests.conftest import eventually
from tests.locks import race_with_an_outcome, waiting_for_locks
from tests.records import new_jobs, outcome

LEASE = 600.0


@pytest.fixture
async def store(database_dsn: str) -> AsyncIterator[PostgresStore]:
    opened = await PostgresStore.open(database_dsn, min_size=1, max_size=4)
    yield opened
    await opened.close()


async def test_a_job_an_operator_holds_waits_for_them_and_the_rest_goes_on(
    database_dsn: str, connection: asyncpg.Connection[Any]
) -> None:
    """A bulk cancel of 5 jobs, one of them locked by an operator's session: the other 4 are
    cancelled at once (the action used to wait for the lock with the whole batch held, and
    give up after the statement timeout with nothing done); the action stays unfinished, and
    finishes once the operator lets go."""
    async with Jobs(database_dsn, queues={}) as jobs:
        ids = await jobs._ready_store.insert_jobs(new_jobs(5, queue="bulk"))
        record = await jobs.begin_bulk("cancel", queue="bulk", by="ada")
        held = ids[1]
        operator = await asyncpg.connect(database_dsn)
        try:
            async with operator.transaction():
                await operator.execute("SELECT FROM starlette_jobs WHERE id = $1 FOR UPDATE", held)
                running = asyncio.create_task(jobs.run_bulk(record.id, batch_size=2))

                async def the_rest_cancelled() -> bool:
                    cancelled = await connection.fetchval(
                        "SELECT count(*) FROM starlette_jobs WHERE status = 'cancelled'"
                    )
                    return bool(cancelled == 4)

                await eventually(the_rest_cancelled, "the jobs not held to be cancelled")
                during = await jobs.get_bulk(record.id)
                assert during is not None
                assert (during.done, during.finished) == (4, False)
                assert not running.done()
            end = await asyncio.wait_for(running, 10)
        finally:
            await operator.close()
        assert end is not None
        assert (end.matched, end.done, end.finished) == (5, 5, True)
        assert {await jobs._ready_store.job_status(i) for i in ids} == {JobStatus.CANCELLED}


async def test_a_bulk_retry_skips_a_job_held_elsewhere_and_takes_it_later(
    store: PostgresStore, database_dsn: str
) -> None:
    """The retry's side: a failed job an operator holds is left to the next batch, which does
    not start past it."""
    ids = await store.insert_jobs(new_jobs(3, queue="bulk", max_attempts=1))
    claims = await store.claim_batch("bulk", 3, "w", LEASE)
    await store.record_outcomes([outcome(c, JobStatus.FAILED, error="boom") for c in claims])
    record = await store.begin_bulk("retry", BulkFilter("bulk"), "ada")
    operator = await asyncpg.connect(database_dsn)
    try:
        async with operator.transaction():
            await operator.execute("SELECT FROM starlette_jobs WHERE id = $1 FOR UPDATE", ids[0])
            first = await asyncio.wait_for(store.bulk_batch(record.id, 500), 5)
        assert first is not None
        assert (first.done, first.finished, first.last_id) == (2, False, ids[0] - 1)
        assert await store.job_status(ids[0]) is JobStatus.FAILED
        second = await store.bulk_batch(record.id, 500)
    finally:
        await operator.close()
    assert second is not None
    assert (second.done, second.finished) == (3, True)
    assert {await store.job_status(i) for i in ids} == {JobStatus.PENDING}


async def test_a_bulk_cancel_and_a_worker_finishing_jobs_it_picked_do_not_deadlock(
    store: PostgresStore, connection: asyncpg.Connection[Any], database_dsn: str
) -> None:
    """`R` runs; `A` and `B` are pending, `A` held by an operator's session. The batch used to
    lock `R` (running jobs first), then wait for `A`; meanwhile a worker claimed `B` (pending
    in the batch's snapshot) and wrote the outcomes of `B` and `R` in id order: `B` locked,
    waiting for `R`. Once `A` was let go, the batch waited for `B`: a deadlock, one side aborted
    after PostgreSQL's deadlock timeout. No order of locks fixes it (the batch sees the
    statuses of its snapshot); now the batch never waits for a lock."""
    a, b = await store.insert_jobs(new_jobs(2, queue="bulk"))
    [r] = await store.insert_jobs(new_jobs(1, queue="bulk", priority=10))
    [r_claim] = await store.claim_batch("bulk", 1, "w", LEASE)
    assert r_claim.id == r
    record = await store.begin_bulk("cancel", BulkFilter("bulk"), "ada")
    first, written = await race_with_an_outcome(
        store, connection, database_dsn, lambda: store.bulk_batch(record.id, 500), a, r_claim
    )
    assert first is not None
    assert not first.finished  # `A` was held: left to the next batch
    assert written == {r}
    second = await store.bulk_batch(record.id, 500)
    assert second is not None
    assert second.finished
    assert await store.job_status(a) is JobStatus.CANCELLED
    assert await store.job_status(b) is JobStatus.CANCELLED


def step(name: str, upstream: tuple[int, ...], allowed: int = 0) -> NewStep:
    return NewStep(step=name, name="tests.part", queue="flow", payload="{}", priority=0,
                   max_attempts=1, upstream=upstream, allowed_failures=allowed)  # fmt: skip


async def test_a_bulk_retry_reopening_a_step_whose_outcome_is_being_written_does_not_deadlock(
    store: PostgresStore, connection: asyncpg.Connection[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`X` -> `d` (which allows one failure) -> `e`. `X` failed and `d` ran anyway; a cancel of
    the workflow cancelled `e` and asked `d` to stop; a bulk retry of the queue took `X` and
    `e`, and went on to reopen `d`, the step waiting for `X`. Meanwhile `d`'s outcome statement
    locked `d` and waited for `e` (to tell it), held by the batch, while the batch waited for
    `d`: a deadlock, one side aborted after PostgreSQL's deadlock timeout. Now the batch waits
    at most 200 ms for a step to reopen: it is rolled back, and the next one goes through."""
    flow = await store.insert_workflow(
        NewWorkflow.of("wf", [step("X", ()), step("d", (0,), allowed=1), step("e", (1,))], None)
    )
    x, d, e = (flow.steps[name] for name in "Xde")
    [x_claim] = await store.claim_batch("flow", 1, "w", LEASE)
    await store.record_outcomes([outcome(x_claim, JobStatus.FAILED, error="boom")])
    [d_claim] = await store.claim_batch("flow", 1, "w", LEASE)
    assert d_claim.id == d
    await store.cancel_workflow(flow.id)
    assert await store.job_status(e) is JobStatus.CANCELLED
    bulk = await store.begin_bulk("retry", BulkFilter("flow"), "ops")
    # The batch, held once it has its rows, before it reopens `d`.
    reached, gate = asyncio.Event(), asyncio.Event()
    reopen = store._reopen

    async def held_reopen(on: Any, step_ids: list[int]) -> None:
        reached.set()
        await gate.wait()
        await reopen(on, step_ids)

    monkeypatch.setattr(store, "_reopen", held_reopen)
    batch = asyncio.create_task(store.bulk_batch(bulk.id, 500))
    await asyncio.wait_for(reached.wait(), 10)
    writing = asyncio.create_task(store.record_outcomes([outcome(d_claim, JobStatus.SUCCEEDED)]))

    async def outcome_waits() -> bool:
        return await waiting_for_locks(connection) >= 1

    await eventually(outcome_waits, "d's outcome to wait for e")
    gate.set()
    first, written = await asyncio.wait_for(asyncio.gather(batch, writing), 15)
    monkeypatch.undo()
    assert first is not None
    assert (first.done, first.finished) == (0, False)  # rolled back: `d` was held
    assert written == {d}
    second = await store.bulk_batch(bulk.id, 500)
    assert second is not None
    assert (second.done, second.finished) == (2, True)
    assert await store.job_status(x) is JobStatus.PENDING


async def test_a_row_held_past_the_statement_timeout_stops_the_run_to_go_on_later(
    database_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`run_bulk` tries a held job again and again, but not for ever: past a statement's timeout
    (made 0.5 s here) it stops with `DatabaseUnavailableError`, the others done, and running it
    again once the lock is gone finishes it. (It polled for as long as the lock lasted.)"""
    monkeypatch.setattr("starlette_jobs._bulk_actions.STATEMENT_TIMEOUT", 0.5)
    async with Jobs(database_dsn, queues={}) as jobs:
        ids = await jobs._ready_store.insert_jobs(new_jobs(3, queue="bulk"))
        record = await jobs.begin_bulk("cancel", queue="bulk", by="ada")
        operator = await asyncpg.connect(database_dsn)
        try:
            async with operator.transaction():
                await operator.execute(
                    "SELECT FROM starlette_jobs WHERE id = $1 FOR UPDATE", ids[0]
                )
                with pytest.raises(DatabaseUnavailableError, match="stayed locked"):
                    await asyncio.wait_for(jobs.run_bulk(record.id), 10)
                during = await jobs.get_bulk(record.id)
        finally:
            await operator.close()
        assert during is not None
        assert (during.done, during.finished) == (2, False)
        end = await jobs.run_bulk(record.id)
        assert end is not None
        assert (end.done, end.finished) == (3, True)


async def test_jobs_whose_unique_key_is_taken_do_not_fill_the_batches_after_a_held_one(
    store: PostgresStore, database_dsn: str
) -> None:
    """A held job, then three failed jobs whose unique key a live job holds (a retry leaves
    them), then an ordinary one; batches of 4. Each batch started again at the held job and
    picked the same four, and the ordinary job was never reached while the lock lasted."""

    async def failed(**fields: str) -> int:
        [job_id] = await store.insert_jobs(new_jobs(1, queue="bulk", max_attempts=1, **fields))  # type: ignore[arg-type]
        [claim] = await store.claim_batch("bulk", 1, "w", LEASE)
        await store.record_outcomes([outcome(claim, JobStatus.FAILED, error="boom")])
        return job_id

    held = await failed()
    keyed = [await failed(unique_key="k") for _ in range(3)]
    await store.insert_jobs(new_jobs(1, queue="other", unique_key="k"))
    ordinary = await failed()
    record = await store.begin_bulk("retry", BulkFilter("bulk"), "ops")
    operator = await asyncpg.connect(database_dsn)
    try:
        async with operator.transaction():
            await operator.execute("SELECT FROM starlette_jobs WHERE id = $1 FOR UPDATE", held)
            batch = await store.bulk_batch(record.id, 4)
            assert batch is not None
            assert (batch.done, batch.finished) == (1, False)
            assert await store.job_status(ordinary) is JobStatus.PENDING
        end = await store.bulk_batch(record.id, 4)
    finally:
        await operator.close()
    assert end is not None
    assert (end.done, end.finished) == (2, True)
    assert {await store.job_status(i) for i in keyed} == {JobStatus.FAILED}


async def test_a_step_to_reopen_held_for_a_moment_is_waited_for(
    store: PostgresStore, connection: asyncpg.Connection[Any], database_dsn: str
) -> None:
    """`J` waits for `X` and `A` (and allows one failure); `X` failed; five plain jobs failed
    too. A bulk retry reopens `J` for `X`, while the outcomes of a fan-in's other steps take
    turns on `J`'s row (an operator's lock stands for one here). The batch used to give up at
    once and roll back all six, every time the row was held: with the fan-in busy, nothing was
    ever retried. It waits a moment for the row now."""
    flow = await store.insert_workflow(
        NewWorkflow.of("fan-in", [step("X", ()), step("A", ()), step("J", (0, 1), allowed=1)], None)
    )
    x, j = flow.steps["X"], flow.steps["J"]
    [x_claim] = await store.claim_batch("flow", 1, "w", LEASE)
    assert x_claim.id == x
    await store.record_outcomes([outcome(x_claim, JobStatus.FAILED, error="boom")])
    plain = await store.insert_jobs(new_jobs(5, queue="flow", max_attempts=1, priority=-1))
    claims = await store.claim_batch("flow", 10, "w", LEASE)
    assert {c.id for c in claims} >= set(plain)
    await store.record_outcomes(
        [outcome(c, JobStatus.FAILED, error="boom") for c in claims if c.id in plain]
    )
    bulk = await store.begin_bulk("retry", BulkFilter("flow"), "ops")
    operator = await asyncpg.connect(database_dsn)
    try:
        async with operator.transaction():
            await operator.execute("SELECT FROM starlette_jobs WHERE id = $1 FOR UPDATE", j)
            batch = asyncio.create_task(store.bulk_batch(bulk.id, 500))

            async def batch_waits() -> bool:
                return await waiting_for_locks(connection) >= 1

            # The batch waits (it rolled back at once, without waiting, before).
            await eventually(batch_waits, "the batch to wait for J's row")
        record = await asyncio.wait_for(batch, 10)
        if record is not None and not record.finished:
            # Let go after its 200 ms had run out (a loaded machine): the next batch takes them.
            record = await store.bulk_batch(bulk.id, 500)
    finally:
        await operator.close()
    assert record is not None
    assert (record.done, record.finished) == (6, True)
    assert {await store.job_status(i) for i in [x, *plain]} == {JobStatus.PENDING}
