"""Workflows on PostgreSQL (`postgres/_workflows.py` and the release in record_outcomes) where
only PostgreSQL can tell: many connections finishing the steps of one fan-in at the same moment
release the collecting step exactly once; a step a rescue failed is told to its dependents by
`settle_steps`; a workflow joins the caller's transaction. What both stores share:
contract/test_workflows_contract.py."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest

from starlette_jobs import DatabaseUnavailableError, EventKind, JobStatus
from starlette_jobs._workflow_records import NewStep, NewWorkflow
from starlette_jobs.postgres._store import PostgresStore
from tests.conftest import eventually
from tests.faultproxy import FaultProxy
from tests.locks import race_with_an_outcome
from tests.records import outcome


@pytest.fixture
async def store(database_dsn: str) -> AsyncIterator[PostgresStore]:
    opened = await PostgresStore.open(database_dsn, min_size=1, max_size=4)
    yield opened
    await opened.close()


def fan_out(width: int, *, max_attempts: int = 3) -> list[NewStep]:
    """`width` steps that wait for none."""
    return [
        NewStep(
            step=f"part[{n}]",
            name="tests.part",
            queue="parts",
            payload="{}",
            priority=0,
            max_attempts=max_attempts,
            upstream=(),
            allowed_failures=0,
        )
        for n in range(width)
    ]


def fan_in(width: int, *, max_attempts: int = 3, allowed_failures: int = 0) -> NewWorkflow:
    """`width` steps, then one that waits for them all."""
    parts = fan_out(width, max_attempts=max_attempts)
    collect = NewStep(
        step="collect", name="tests.collect", queue="collect", payload="{}", priority=0,
        max_attempts=3, upstream=tuple(range(width)), allowed_failures=allowed_failures,
    )  # fmt: skip
    return NewWorkflow.of("fan-in", [*parts, collect], trace_context=None)


async def test_steps_finishing_at_once_on_many_connections_release_once(
    store: PostgresStore, database_dsn: str
) -> None:
    writers = [await PostgresStore.open(database_dsn, min_size=1, max_size=2) for _ in range(4)]
    try:
        for _ in range(20):
            enqueued = await store.insert_workflow(fan_in(40))
            claims = await store.claim_batch("parts", 100, "w", 30)
            assert len(claims) == 40
            # Four connections, each writing ten outcomes at the same moment, one each time.
            batches = [claims[n::4] for n in range(4)]

            async def write(writer: PostgresStore, batch: list[Any]) -> None:
                for claim in batch:
                    done = outcome(claim, JobStatus.SUCCEEDED, result="1")
                    assert await writer.record_outcomes([done]) == {claim.id}

            await asyncio.gather(*(write(w, b) for w, b in zip(writers, batches, strict=True)))
            collect = enqueued.steps["collect"]
            assert await store.job_status(collect) is JobStatus.PENDING
            kinds = [event.kind for event in await store.job_events(collect)]
            assert kinds == [EventKind.ENQUEUED, EventKind.READY]
            (claim,) = await store.claim_batch("collect", 10, "w", 30)
            assert await store.record_outcomes([outcome(claim, JobStatus.SUCCEEDED)])
    finally:
        for writer in writers:
            await writer.close()


async def test_failures_at_once_cancel_the_waiting_step_once(
    store: PostgresStore, database_dsn: str
) -> None:
    writers = [await PostgresStore.open(database_dsn, min_size=1, max_size=2) for _ in range(4)]
    try:
        enqueued = await store.insert_workflow(fan_in(8, max_attempts=1))
        claims = await store.claim_batch("parts", 100, "w", 30)
        await asyncio.gather(
            *(
                w.record_outcomes([outcome(c, JobStatus.FAILED, error="no")])
                for w, c in zip(writers * 2, claims, strict=True)
            )
        )
        events = await store.job_events(enqueued.steps["collect"])
        assert [e.kind for e in events] == [EventKind.ENQUEUED, EventKind.CANCELLED]
        assert events[-1].error is not None
        assert events[-1].error.startswith("cancelled: it waits for step part[")
    finally:
        for writer in writers:
            await writer.close()


async def test_a_step_failed_by_a_rescue_is_told_by_settle_steps(store: PostgresStore) -> None:
    enqueued = await store.insert_workflow(fan_in(1, max_attempts=1))
    await store.claim_batch("parts", 10, "w", 0.01)
    await asyncio.sleep(0.05)  # the lease runs out: what a crashed worker leaves
    rescued = await store.rescue_expired(10)
    assert [status for _, _, status in rescued] == [JobStatus.FAILED]
    collect = enqueued.steps["collect"]
    assert await store.job_status(collect) is JobStatus.WAITING  # the rescue told no one
    assert await store.settle_steps() == 1
    assert await store.job_status(collect) is JobStatus.CANCELLED
    assert await store.settle_steps() == 0


async def test_a_step_whose_dependent_is_locked_holds_up_no_other_settling(
    store: PostgresStore, connection: asyncpg.Connection[Any]
) -> None:
    """Steps a rescue failed, each with a step waiting for it; an operator holds one of those
    locked (that of a fan-in of three, which fills a batch of `settle_steps` by itself).
    `settle_steps` waited for the lock, ran out of time, and told none, round after round;
    then it skipped the held step but stopped at its batch, full of held steps. Now it tells
    the others at once, and the held one once it is free."""
    first = await store.insert_workflow(fan_in(3, max_attempts=1))
    second = await store.insert_workflow(fan_in(1, max_attempts=1))
    await store.claim_batch("parts", 10, "w", 0.01)
    await asyncio.sleep(0.05)  # the leases run out: what a crashed worker leaves
    assert len(await store.rescue_expired(10)) == 4
    held, other = first.steps["collect"], second.steps["collect"]
    async with connection.transaction():
        await connection.execute("SELECT FROM starlette_jobs WHERE id = $1 FOR UPDATE", held)
        assert await asyncio.wait_for(store.settle_steps(limit=3), 3) == 1
        assert await store.job_status(other) is JobStatus.CANCELLED
    assert await store.job_status(held) is JobStatus.WAITING
    assert await store.settle_steps(limit=3) == 3
    assert await store.job_status(held) is JobStatus.CANCELLED


async def test_a_committed_cancellation_stands_when_telling_its_cascade_fails(
    fault_proxy: FaultProxy,
) -> None:
    """`A` fails, which cancels `B`, which `C` waits for: the outcome statement commits, then
    a second statement tells `C` (the cascade). When that one failed, the failure reached the
    caller: a worker took its committed outcome for unwritten (its lease lost), and a caller
    of `cancel` an error for a cancellation that happened. Now the committed write is
    answered as written, and the upkeep's `settle_steps` tells `C` later."""
    chain = [
        NewStep(step=name, name="tests.part", queue="parts", payload="{}", priority=0,
                max_attempts=1, upstream=upstream, allowed_failures=0)
        for name, upstream in [("A", ()), ("B", (0,)), ("C", (1,))]
    ]  # fmt: skip
    store = await PostgresStore.open(
        fault_proxy.dsn, min_size=1, max_size=2, worker_statement_timeout=0.5
    )
    try:
        for ending in ("outcome", "cancel"):
            steps = (await store.insert_workflow(NewWorkflow.of("chain", chain, None))).steps
            fault_proxy.blackhole_at("WITH unsettled AS MATERIALIZED")  # settle_steps
            if ending == "outcome":
                (claim,) = await store.claim_batch("parts", 10, "w", 30)
                failed = outcome(claim, JobStatus.FAILED, error="no")
                assert await store.record_outcomes([failed]) == {steps["A"]}
            else:
                assert await store.cancel_job(steps["A"]) is JobStatus.CANCELLED
            fault_proxy.heal()  # (the statement held is let through: it may tell `C` now)
            assert await store.job_status(steps["B"]) is JobStatus.CANCELLED
            await store.settle_steps()
            assert await store.job_status(steps["C"]) is JobStatus.CANCELLED
    finally:
        fault_proxy.heal()
        await store.close()


async def test_a_workflow_joins_the_callers_transaction(
    store: PostgresStore, connection: asyncpg.Connection[Any]
) -> None:
    async with connection.transaction():
        enqueued = await store.insert_workflow(fan_in(2), connection)
        assert await store.get_workflow(enqueued.id) is None  # not committed yet
    assert await store.get_workflow(enqueued.id) is not None
    rollback = connection.transaction()
    await rollback.start()
    dropped = await store.insert_workflow(fan_in(2), connection)
    await rollback.rollback()
    assert await store.get_workflow(dropped.id) is None
    assert await store.get_job(dropped.steps["collect"]) is None


async def test_a_job_of_no_workflow_writes_no_workflow_column(
    store: PostgresStore, connection: asyncpg.Connection[Any]
) -> None:
    from tests.records import new_jobs

    [job_id] = await store.insert_jobs(new_jobs())
    (claim,) = await store.claim_batch("default", 1, "w", 30)
    await store.record_outcomes([outcome(claim, JobStatus.SUCCEEDED)])
    row = await connection.fetchrow(
        "SELECT workflow_id, upstream, dependents, settled FROM starlette_jobs WHERE id = $1",
        job_id,
    )
    assert tuple(row) == (None, None, None, False)  # type: ignore[arg-type]
    index_rows = await connection.fetchval(
        "SELECT count(*) FROM starlette_jobs WHERE dependents IS NOT NULL AND NOT settled"
    )
    assert index_rows == 0


async def test_a_workflow_retry_on_a_silent_network_gives_up_in_time_without_a_cancel_request(
    fault_proxy: FaultProxy,
) -> None:
    """Statements in a transaction of the pool keep their own time, as single ones do: on a
    network gone silent the caller hears that the database is unavailable within the
    statement timeout, and no cancel request tries to cross it (when that failed, its error
    was left where nobody reads it)."""
    store = await PostgresStore.open(fault_proxy.dsn, min_size=1, max_size=1, statement_timeout=0.5)
    try:
        enqueued = await store.insert_workflow(fan_in(2))
        fault_proxy.blackhole(where=lambda connection: True)  # those open now
        fault_proxy.set_delay(60.0)  # and those opened later: nothing gets through
        started = time.monotonic()
        with pytest.raises(DatabaseUnavailableError):
            await store.retry_job(enqueued.steps["part[0]"])
        waited = time.monotonic() - started
    finally:
        fault_proxy.heal()
        fault_proxy.set_delay(0.0)
        await store.close()
    assert waited < 3
    assert [c for c in fault_proxy.connections if c.kind == "cancel"] == []


async def test_a_deadlock_reaches_the_caller_as_the_database_unavailable_for_now(
    store: PostgresStore, database_dsn: str
) -> None:
    """PostgreSQL aborts one of two transactions that lock each other's rows: a caller of the
    store sees `DatabaseUnavailableError` (a 503 with Retry-After on the web side; the worker
    keeps an outcome and writes it again, whole), not the driver's own exception. Here an
    operator's session locks the second step and then asks for the first, while the outcome
    statement of both (which locks them in id order) holds the first and waits for the second.
    The operator's session looks for deadlocks later, so the outcome statement is aborted."""
    enqueued = await store.insert_workflow(NewWorkflow.of("pair", fan_out(2), None))
    first, second = enqueued.steps["part[0]"], enqueued.steps["part[1]"]
    claims = await store.claim_batch("parts", 2, "w", 600)
    operator = await asyncpg.connect(database_dsn)
    try:
        await operator.execute("SET deadlock_timeout = '30s'")
        async with operator.transaction():
            await operator.execute("SELECT FROM starlette_jobs WHERE id = $1 FOR UPDATE", second)
            finished = [outcome(c, JobStatus.SUCCEEDED) for c in claims]
            writing = asyncio.create_task(store.record_outcomes(finished))

            async def writing_waits_for_the_second_step() -> bool:
                # Waits behind this transaction: other test processes may share the server.
                waiting = await operator.fetchval(
                    "SELECT count(*) FROM pg_locks WHERE NOT granted AND locktype = 'transactionid'"
                    " AND pg_backend_pid() = ANY(pg_blocking_pids(pid))"
                )
                return bool(waiting)

            await eventually(writing_waits_for_the_second_step, "the outcomes to wait")
            await operator.execute("SELECT FROM starlette_jobs WHERE id = $1 FOR UPDATE", first)
        with pytest.raises(DatabaseUnavailableError, match="conflict with another transaction"):
            await writing
    finally:
        await operator.close()
    assert await store.job_status(first) is JobStatus.RUNNING  # nothing of it was written
    assert await store.record_outcomes(finished) == {first, second}  # and tried again, it is


async def test_cancelling_a_workflow_and_a_worker_finishing_steps_it_saw_pending_do_not_deadlock(
    store: PostgresStore, connection: asyncpg.Connection[Any], database_dsn: str
) -> None:
    """`R` runs; `A` and `B` are pending, `A` held by an operator's session. The cancel used to
    lock `R` (running steps first), then wait for `A`; meanwhile a worker claimed `B` (pending
    in the cancel's snapshot) and wrote the outcomes of `B` and `R` in id order: `B` locked,
    waiting for `R`. Once `A` was let go, the cancel waited for `B`: a deadlock, one side
    aborted after PostgreSQL's deadlock timeout. No order of locks fixes it (the cancel sees
    the statuses of its snapshot); now it never waits for a lock, and cancels what it skipped
    in another round."""
    steps = [*fan_out(2), *fan_out(1)]
    steps[2] = NewStep(step="R", name="tests.part", queue="parts", payload="{}", priority=10,
                       max_attempts=1, upstream=(), allowed_failures=0)  # fmt: skip
    enqueued = await store.insert_workflow(NewWorkflow.of("race", steps, trace_context=None))
    a, b, r = (enqueued.steps[name] for name in ("part[0]", "part[1]", "R"))
    [r_claim] = await store.claim_batch("parts", 1, "w", 600)
    assert r_claim.id == r
    cancelled, written = await race_with_an_outcome(
        store, connection, database_dsn, lambda: store.cancel_workflow(enqueued.id), a, r_claim
    )
    assert dict(cancelled) == {a: JobStatus.CANCELLED, b: JobStatus.CANCELLED, r: JobStatus.RUNNING}
    assert written == {r}  # asked to stop, it had finished: its outcome stands
    assert await store.job_status(a) is JobStatus.CANCELLED


async def test_a_workflow_step_held_past_the_statement_timeout_fails_the_cancel_for_now(
    database_dsn: str,
) -> None:
    """The cancel waits for a step locked elsewhere no longer than the statement timeout: the
    others are cancelled, the caller is told, and cancelling again takes the last one."""
    store = await PostgresStore.open(database_dsn, min_size=1, max_size=2, statement_timeout=1)
    enqueued = await store.insert_workflow(NewWorkflow.of("held", fan_out(3), None))
    held = enqueued.steps["part[1]"]
    operator = await asyncpg.connect(database_dsn)
    try:
        async with operator.transaction():
            await operator.execute("SELECT FROM starlette_jobs WHERE id = $1 FOR UPDATE", held)
            stayed = r"1 step\(s\) of workflow \d+ stayed locked"
            with pytest.raises(DatabaseUnavailableError, match=stayed):
                await store.cancel_workflow(enqueued.id)
            statuses = {i: await store.job_status(i) for i in enqueued.steps.values()}
        assert await store.cancel_workflow(enqueued.id) == [(held, JobStatus.CANCELLED)]
    finally:
        await operator.close()
        await store.close()
    assert statuses == {
        enqueued.steps["part[0]"]: JobStatus.CANCELLED,
        held: JobStatus.PENDING,
        enqueued.steps["part[2]"]: JobStatus.CANCELLED,
    }


async def test_a_retry_that_reopens_a_step_while_another_upstream_of_it_finishes_loses_no_count(
    store: PostgresStore, database_dsn: str
) -> None:
    """`D` waits for `B` and `C`; `B` failed, which cancelled `D`. The operator retries `B`
    while `C`'s outcome is being written: the retry counts `C` as unfinished (its outcome is
    not committed), and `C`'s outcome statement, whose snapshot still shows `D` cancelled, must
    still tell `D` once the retry has committed. Here `C`'s statement is held in flight by a
    lock on `X`, another step waiting for `C` (a statement telling `X`, as any could)."""
    steps = [
        NewStep(step=name, name="tests.part", queue="parts", payload="{}", priority=0,
                max_attempts=1, upstream=upstream, allowed_failures=0)
        for name, upstream in [("B", ()), ("C", ()), ("X", (1,)), ("D", (0, 1))]
    ]  # fmt: skip
    enqueued = await store.insert_workflow(NewWorkflow.of("race", steps, trace_context=None))
    ids = enqueued.steps
    claims = {claim.id: claim for claim in await store.claim_batch("parts", 10, "w", 30)}
    await store.record_outcomes([outcome(claims[ids["B"]], JobStatus.FAILED, error="no")])
    assert await store.job_status(ids["D"]) is JobStatus.CANCELLED
    other = await asyncpg.connect(database_dsn)
    try:
        async with other.transaction():
            await other.execute("SELECT FROM starlette_jobs WHERE id = $1 FOR UPDATE", ids["X"])
            succeeded = outcome(claims[ids["C"]], JobStatus.SUCCEEDED, result='"c"')
            writing = asyncio.create_task(store.record_outcomes([succeeded]))

            async def outcome_waits() -> bool:
                waits = (
                    "SELECT count(*) FROM pg_locks WHERE NOT granted"
                    " AND pg_backend_pid() = ANY(pg_blocking_pids(pid))"
                )
                return bool(await other.fetchval(waits))

            await eventually(outcome_waits, "the outcome of C to wait for the lock on X")
            assert await store.retry_job(ids["B"])
            assert await store.job_status(ids["D"]) is JobStatus.WAITING
        assert await writing == {ids["C"]}
    finally:
        await other.close()
    again = {claim.id: claim for claim in await store.claim_batch("parts", 10, "w", 30)}
    assert set(again) == {ids["B"], ids["X"]}
    await store.record_outcomes([outcome(again[ids["B"]], JobStatus.SUCCEEDED, result='"b"')])
    assert await store.job_status(ids["D"]) is JobStatus.PENDING


async def test_a_workflow_whose_last_steps_two_workers_prune_at_once_goes_with_them(
    store: PostgresStore, database_dsn: str
) -> None:
    """Each round's statement saw the other's step as still there, so neither deleted the
    workflow's record: it outlived its steps for good. The round that deleted steps of a
    workflow and kept its record looks again once it has committed."""
    pair = NewWorkflow.of("pair", fan_out(2), trace_context=None)
    enqueued = await store.insert_workflow(pair)
    # The first step fails once (an event row to hold), then both succeed, the first first.
    [claim] = await store.claim_batch("parts", 1, "w", 30)
    retried = outcome(claim, JobStatus.PENDING, delay=0.0, error="boom")
    assert await store.record_outcomes([retried]) == {claim.id}
    claims = sorted(await store.claim_batch("parts", 2, "w", 30))  # by id: the first first
    for claim in claims:
        assert await store.record_outcomes([outcome(claim, JobStatus.SUCCEEDED)]) == {claim.id}
    await asyncio.sleep(0.05)
    other = await PostgresStore.open(database_dsn, min_size=1, max_size=2)
    holder = await asyncpg.connect(database_dsn)
    try:
        # An operator reading the first step's events FOR UPDATE holds the first round in its
        # statement (at the events' DELETE) after its snapshot was taken.
        first, second = enqueued.steps["part[0]"], enqueued.steps["part[1]"]
        held = holder.transaction()
        await held.start()
        await holder.execute(
            "SELECT FROM starlette_jobs_events WHERE job_id = $1 FOR UPDATE", first
        )
        first_round = asyncio.create_task(store.prune_finished(0.01, 1))
        waiting = (
            "SELECT count(*) > 0 FROM pg_stat_activity WHERE datname = current_database()"
            " AND wait_event_type = 'Lock'"
            " AND query LIKE '-- Looks at the next % jobs that finished%'"
        )
        # Asked outside the holder's transaction: inside, pg_stat_activity is read once.
        await eventually(lambda: other.pool.fetchval(waiting), "the first round to wait")
        # The second step; the first is locked.
        assert (await other.prune_finished(0.01, 10)).deleted == 1
        await held.commit()
        assert (await first_round).deleted == 1
        assert await store.get_job(first) is None
        assert await store.get_job(second) is None
        assert await store.get_workflow(enqueued.id) is None
    finally:
        await holder.close()
        await other.close()
