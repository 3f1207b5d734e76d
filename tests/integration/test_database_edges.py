"""The database at its edges: a row locked past the statement timeout, a claim that arrives
late or whose answer is lost, a pool connection gone silent at shutdown, no connection slot
left, a database that takes no new connection, a foreign key to a running job. Each test failed
on the first version of the hardened worker (found by an adversarial review), or on the code
before the store told the driver's errors (issue 18); its docstring says the mechanism."""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from typing import Any

import asyncpg
import httpx2
import pytest
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from starlette_jobs import (
    DatabaseUnavailableError,
    Jobs,
    JobStatus,
    OnSuccessMiddleware,
    Retry,
    Workflow,
    job,
)
from starlette_jobs._attempt_records import Claim
from starlette_jobs.postgres._store import PostgresStore
from tests.conftest import StartJobs, eventually
from tests.faultproxy import FaultProxy
from tests.outages import database_refusing_connections

pytestmark = [pytest.mark.timeout(240)]

gates: dict[str, asyncio.Event] = {}
started: dict[str, asyncio.Event] = {}
ran: list[str] = []


@pytest.fixture(autouse=True)
def _clear() -> None:
    gates.clear()
    started.clear()
    ran.clear()


@job(retry=Retry.fixed(max_attempts=3, delay=0))
async def gated(key: str) -> dict[str, str]:
    ran.append(key)
    started.setdefault(key, asyncio.Event()).set()
    await gates.setdefault(key, asyncio.Event()).wait()
    return {"key": key}


@job(retry=Retry.none())
async def once(key: str) -> None:
    ran.append(key)


async def _status_is(connection: asyncpg.Connection[Any], job_id: int, status: str) -> bool:
    found: str | None = await connection.fetchval(
        "SELECT status FROM starlette_jobs WHERE id = $1", job_id
    )
    return found == status


# -- 2: a lost claim at shutdown strands its jobs `running` ---------------------------------------


async def test_a_claim_lost_just_before_shutdown_leaves_no_job_running(
    start_jobs: StartJobs, monkeypatch: pytest.MonkeyPatch, connection: asyncpg.Connection[Any]
) -> None:
    """A claim whose answer was lost sets `claim_may_be_lost`; its jobs are given back only at
    the top of the next loop iteration (`_release_lost_claims`). When stop() comes during the
    backoff, `while not self._stopping` exits first and nothing gives them back: a clean
    shutdown leaves them `running`, and at lease expiry the rescue burns their attempt: a
    Retry.none() job fails with 'lease expired' without ever having run."""
    real_claim = PostgresStore.claim_batch
    lost = asyncio.Event()

    async def answer_lost_once(self: PostgresStore, *args: Any) -> list[Claim]:
        claims = await real_claim(self, *args)
        if claims and not lost.is_set():
            lost.set()
            raise asyncpg.ConnectionDoesNotExistError("connection was closed in the middle")
        return claims

    monkeypatch.setattr(PostgresStore, "claim_batch", answer_lost_once)
    async with start_jobs(queues={}):
        ids = await once.enqueue_many([{"key": str(n)} for n in range(3)])
    async with start_jobs(lease_duration=2, shutdown_grace=1):
        await asyncio.wait_for(lost.wait(), 10)
    rows = await connection.fetch(
        "SELECT id, status, attempts FROM starlette_jobs WHERE id = ANY($1::bigint[]) ORDER BY id",
        ids,
    )
    assert [tuple(r) for r in rows] == [(i, "pending", 0) for i in ids]


# -- 3: a claim delivered late commits after release_unknown_claims ran ---------------------------


def _claims(c: Any) -> bool:
    ran_it: bool = c.ran("WITH picked AS")
    return ran_it


async def test_a_claim_delivered_late_does_not_strand_its_job(
    fault_proxy: FaultProxy, database_dsn: str, connection: asyncpg.Connection[Any]
) -> None:
    """The server's statement_timeout only bounds a statement once it *arrives*. A claim whose
    bytes are held on the route (TCP retransmission; the proxy's blackhole holds bytes the way
    it does) times out on the client; the claim loop runs `release_unknown_claims` (nothing to
    release yet), clears `claim_may_be_lost`, and claims on a new connection. When the route
    heals before the old socket is torn down (graceful close waits one statement timeout), the
    held claim runs and commits under a token nobody knows. Nothing looks for it again: the
    job sits `running` until its lease expires, then the rescue burns its only attempt: a
    Retry.none() job fails without ever having run (at-least-once broken)."""
    lease = 9.0  # worker statement timeout 3 s
    async with (
        Jobs(database_dsn, queues={}) as producer,
        Jobs(fault_proxy.dsn, queues={"default": 1}, lease_duration=lease, poll_interval=0.2),
    ):
        first = await fault_proxy.wait_for(_claims)
        await asyncio.sleep(0.1)  # between two polls: the next claim's request is held
        first.blackhole()  # the next claim (within a poll) is held on the route
        second = await fault_proxy.wait_for(lambda c: _claims(c) and c is not first, timeout=15)
        # release_unknown_claims has run (it comes before the claim on the new connection).
        second.blackhole()
        await asyncio.sleep(0.3)
        job_id = await producer.enqueue(once, key="late")
        # The held claim may reach the server now (on the first worker version it did, and
        # committed behind the worker's back); the job must run all the same.
        first.heal()
        second.heal()
        began = time.monotonic()
        await eventually(
            lambda: _finished(connection, job_id), "the job to finish", timeout=lease * 3
        )
        took = time.monotonic() - began
    row = await connection.fetchrow(
        "SELECT status, attempts, last_error FROM starlette_jobs WHERE id = $1", job_id
    )
    print(f"late claim: {tuple(row) if row else None} after {took:.1f} s; ran={ran}")
    assert ran == ["late"], f"the job never ran: {tuple(row) if row else None}"


async def _finished(connection: asyncpg.Connection[Any], job_id: int) -> bool:
    status: str | None = await connection.fetchval(
        "SELECT status FROM starlette_jobs WHERE id = $1", job_id
    )
    return status in ("succeeded", "failed")


# -- 4: a statement the server ended for taking too long reaches users as the library's error --


async def test_a_statement_the_server_ended_for_taking_too_long_is_the_librarys_error(
    start_jobs: StartJobs, connection: asyncpg.Connection[Any]
) -> None:
    """Every connection carries a server-side statement_timeout (80 % of the client's), so a
    call blocked by a lock, or a batch too large to insert in time, is ended by the server
    with QueryCanceledError: a caller gets DatabaseUnavailableError saying so, not the
    driver's exception (which the first hardened version let through)."""
    async with start_jobs(queues={}) as jobs:
        job_id = await once.enqueue(key="locked")
        async with connection.transaction():
            await connection.execute(
                "SELECT 1 FROM starlette_jobs WHERE id = $1 FOR UPDATE", job_id
            )
            with pytest.raises(DatabaseUnavailableError, match="did not finish it in time"):
                await jobs.cancel(job_id)


# -- 5: a pool statement cancelled at shutdown waits for asyncpg's cancel, unbounded -------------


async def test_shutdown_with_a_silent_pool_connection_ends_within_the_bound(
    fault_proxy: FaultProxy, database_dsn: str
) -> None:
    """SharedPool.run terminates a pool connection whose statement failed or timed out, but not
    one whose caller was *cancelled*. stop() cancels its last writes after one worker statement
    timeout (`wait_for(settled, budget)`, budget = lease/3, here 2 s, below the pool's 10 s
    command timeout); a `release_jobs` cancelled mid-statement leaves `async with
    pool.acquire()` through asyncpg's `PoolConnectionHolder.release`, which waits for the
    cancellation to complete (bounded only by the pool's command_timeout, 10 s) on a connection
    whose network is silent. wait_for() waits for its cancelled inner task, so the shutdown
    takes grace + 0.5 + ~10 s + close instead of the documented grace + 0.5 + 2 + 2 (measured:
    12.5 s against a 5.0 s bound). Meanwhile the cancelled job, no longer renewed nor released,
    is rescued with its attempt burned. `_upkeep.stop()` (unbounded) can hang the same way."""
    from starlette_jobs.worker._shutdown import shutdown_bound

    lease, grace = 6.0, 0.5
    jobs = Jobs(
        fault_proxy.dsn, queues={"default": 2}, lease_duration=lease, shutdown_grace=grace,
    )  # fmt: skip
    await jobs.__aenter__()
    try:
        await gated.enqueue(key="h")
        await asyncio.wait_for(started.setdefault("h", asyncio.Event()).wait(), 10)
        for _ in range(12):  # every holder of the pool gets a live connection
            await jobs.get(1)
        fault_proxy.blackhole(where=lambda c: c.application_name == "starlette_jobs pool")
        began = time.monotonic()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(jobs.__aexit__(None, None, None), 40)
        took = time.monotonic() - began
    finally:
        fault_proxy.heal()
    bound = shutdown_bound(grace, lease)
    assert took <= bound + 1.0, f"shutdown took {took:.1f} s; the bound is {bound:.1f} s"


# -- 6: "too many connections" leaks as a raw asyncpg error ---------------------------------------


async def test_too_many_connections_is_reported_as_unavailable_not_raw(
    database_dsn: str, connection: asyncpg.Connection[Any]
) -> None:
    """A connection storm (a deploy where old and new processes overlap) makes PostgreSQL refuse
    new sessions with SQLSTATE 53300 (TooManyConnectionsError). It is a PostgresError, not in
    DATABASE_ERRORS: when a lane has to reconnect then, `unavailable_as_error` lets asyncpg's
    raw TooManyConnectionsError through to the caller of `enqueue` (and `get`, `list`...),
    instead of DatabaseUnavailableError; at start it is not treated as an outage either (the
    app fails to start with the raw error). Simulated with a role's CONNECTION LIMIT (superusers
    are exempt, so a plain role)."""
    role = f"sj_review_{os.getpid()}_{int(time.time() * 1000) % 10**9}"
    await connection.execute(f"CREATE ROLE {role} LOGIN")
    await connection.execute(f"GRANT ALL ON ALL TABLES IN SCHEMA public TO {role}")
    await connection.execute(f"GRANT ALL ON ALL SEQUENCES IN SCHEMA public TO {role}")
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(database_dsn)
    netloc = parts.netloc.rpartition("@")[2]
    dsn = urlunsplit(parts._replace(netloc=f"{role}@{netloc}"))
    errors: list[str] = []
    async with Jobs(dsn, queues={}, migrate=False):
        await once.enqueue(key="first")  # the producer's connection is open
        hog = await asyncpg.connect(dsn)
        used = await connection.fetchval(
            "SELECT count(*) FROM pg_stat_activity WHERE usename = $1", role
        )
        await connection.execute(f"ALTER ROLE {role} CONNECTION LIMIT {used}")  # full
        try:
            await connection.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE datname = current_database()"
                " AND application_name = 'starlette_jobs enqueue'"
            )
            await asyncio.sleep(0.2)
            blocker = await asyncpg.connect(dsn)  # the freed slot is taken by someone else
            try:
                for _ in range(3):
                    try:
                        await once.enqueue(key="again")
                    except Exception as error:
                        errors.append(f"{type(error).__module__}.{type(error).__name__}")
            finally:
                await blocker.close()
        finally:
            await hog.close()
    print(errors)
    assert errors, "the enqueue should have failed: no connection slot was left"
    assert set(errors) == {"starlette_jobs._errors.DatabaseUnavailableError"}, errors


# -- 1: an outcome held up by a row lock past the statement timeout ------------------------------


async def test_an_outcome_held_up_by_a_row_lock_keeps_its_result(
    start_jobs: StartJobs, connection: asyncpg.Connection[Any]
) -> None:
    """The same mechanism as the test above, with a shorter lock (between 2 and 3 server
    statement timeouts): the batch write and the one-by-one write are cancelled, the *stripped*
    write goes through: the job is `succeeded` with its result silently replaced by None."""
    # A short lease keeps the test short: worker statement timeout 3 s, server 2.4 s; the lock
    # is held 6 s, less than the lease, which its renewals (blocked by the lock) cannot extend.
    async with start_jobs(lease_duration=9) as jobs:
        job_id = await gated.enqueue(key="b")
        await asyncio.wait_for(started.setdefault("b", asyncio.Event()).wait(), 10)
        async with connection.transaction():
            await connection.execute(
                "SELECT 1 FROM starlette_jobs WHERE id = $1 FOR UPDATE", job_id
            )
            gates.setdefault("b", asyncio.Event()).set()
            await asyncio.sleep(6)  # past 2 x 2.4 s
        await eventually(
            lambda: _status_is(connection, job_id, "succeeded"), "the outcome", timeout=10
        )
        record = await jobs.get(job_id)
    assert record is not None
    assert (record.status, record.result) == (JobStatus.SUCCEEDED, {"key": "b"})


async def test_a_row_locked_by_an_operator_does_not_hold_back_the_other_outcomes(
    start_jobs: StartJobs, connection: asyncpg.Connection[Any]
) -> None:
    """An operator holds one finished job's row locked (`SELECT ... FOR UPDATE` in an open
    transaction). The outcome writer ran out of time on it, halved its batch, which began with
    it again, and again: no other outcome of the worker was written while the lock lasted, and
    a shutdown then left them all to run again. Now the others are written within a statement
    timeout (3 s here), and the locked one once the lock is gone."""
    async with start_jobs(queues={"default": 5}, lease_duration=9) as jobs:
        ids = {key: await gated.enqueue(key=key) for key in ("held", "a", "b", "c", "d")}
        for key in ids:
            await asyncio.wait_for(started.setdefault(key, asyncio.Event()).wait(), 10)
        async with connection.transaction():
            await connection.execute(
                "SELECT 1 FROM starlette_jobs WHERE id = $1 FOR UPDATE", ids["held"]
            )
            gates.setdefault("held", asyncio.Event()).set()  # its outcome is written first
            await asyncio.sleep(0.2)
            for key in "abcd":
                gates.setdefault(key, asyncio.Event()).set()

            async def others_written() -> bool:
                return all([await _status_is(connection, ids[key], "succeeded") for key in "abcd"])

            await eventually(
                others_written, "the others' outcomes, while the lock holds", timeout=8
            )
            assert await _status_is(connection, ids["held"], "running")
        await eventually(
            lambda: _status_is(connection, ids["held"], "succeeded"),
            "the locked job's outcome, once the lock is gone",
            timeout=10,
        )
        held = await jobs.get(ids["held"])
    assert held is not None
    assert (held.result, held.attempts) == ({"key": "held"}, 1)


async def test_a_lock_on_a_step_waiting_for_a_finished_one_does_not_hold_back_the_others(
    start_jobs: StartJobs, connection: asyncpg.Connection[Any]
) -> None:
    """An operator holds locked the row of a workflow's step that waits for a running one. The
    running step's outcome statement also writes the waiting step (it tells it of the finish),
    so it waited for the lock and ran out of time; asked which rows were locked, the store named
    none of the batch's own, so the writer halved the batch, which began with it again, and
    again: no outcome of the worker was written while the lock lasted. Now that outcome is set
    aside like one whose own row is locked, and written (the waiting step told) once it is free."""
    async with start_jobs(queues={"default": 5}, lease_duration=9) as jobs:
        flow = Workflow("locked-dependent")
        upstream = flow.add("upstream", gated, key="upstream")
        flow.after(upstream).add("dependent", once, key="dependent")
        steps = (await flow.enqueue(jobs=jobs)).steps
        ids = {key: await gated.enqueue(key=key) for key in "abcd"}
        for key in ("upstream", *ids):
            await asyncio.wait_for(started.setdefault(key, asyncio.Event()).wait(), 10)
        async with connection.transaction():
            await connection.execute(
                "SELECT 1 FROM starlette_jobs WHERE id = $1 FOR UPDATE", steps["dependent"]
            )
            gates.setdefault("upstream", asyncio.Event()).set()  # its outcome is written first
            await asyncio.sleep(0.2)
            for key in ids:
                gates.setdefault(key, asyncio.Event()).set()

            async def others_written() -> bool:
                return all([await _status_is(connection, ids[key], "succeeded") for key in ids])

            await eventually(
                others_written, "the others' outcomes, while the lock holds", timeout=8
            )
            assert await _status_is(connection, steps["upstream"], "running")
        finished = await jobs.wait(steps["dependent"], timeout=10)
        upstream_record = await jobs.get(steps["upstream"])
    assert finished.status is JobStatus.SUCCEEDED
    assert "dependent" in ran
    assert upstream_record is not None
    assert (upstream_record.result, upstream_record.attempts) == ({"key": "upstream"}, 1)


async def test_a_row_locked_by_an_operator_at_shutdown_leaves_the_others_given_back(
    start_jobs: StartJobs, connection: asyncpg.Connection[Any]
) -> None:
    """Shutdown gives back in one statement the jobs that outlast the grace. One row held
    locked by an operator made it wait, run out of time, and give back none: all stayed
    `running` until their leases expired, then were failed or charged an attempt. Now the
    others are given back at once, attempt returned; the locked one waits for its lease."""
    ids = {}
    async with start_jobs(queues={"default": 3}, lease_duration=9, shutdown_grace=0.2):
        ids = {key: await gated.enqueue(key=key) for key in ("held", "a", "b")}
        for key in ids:
            await asyncio.wait_for(started.setdefault(key, asyncio.Event()).wait(), 10)
        lock = connection.transaction()
        await lock.start()
        await connection.execute(
            "SELECT 1 FROM starlette_jobs WHERE id = $1 FOR UPDATE", ids["held"]
        )
    try:
        rows = await connection.fetch(
            "SELECT id, status, attempts FROM starlette_jobs WHERE id = ANY($1::bigint[])",
            list(ids.values()),
        )
        found = {row["id"]: (row["status"], row["attempts"]) for row in rows}
    finally:
        await lock.rollback()
    assert found == {
        ids["held"]: ("running", 1),
        ids["a"]: ("pending", 0),
        ids["b"]: ("pending", 0),
    }


# -- 7: the heartbeat's FOR UPDATE conflicts with a foreign key's FOR KEY SHARE --------------------

from starlette_jobs import current_job  # noqa: E402


@job(queue="fk", retry=Retry.fixed(max_attempts=3, delay=0))
async def writes_rows_about_itself(dsn: str, hold: float, after: float) -> None:
    me = current_job()
    assert me is not None
    ran.append(f"fk:{me.attempt}")
    own: asyncpg.Connection[Any] = await asyncpg.connect(dsn)
    try:
        async with own.transaction():
            # An application table with a foreign key to the job: PostgreSQL's RI check takes
            # FOR KEY SHARE on the job's row until this transaction ends.
            await own.execute("INSERT INTO review_job_log (job_id) VALUES ($1)", me.id)
            await asyncio.sleep(hold)
    finally:
        await own.close()
    await asyncio.sleep(after)


async def test_a_foreign_key_to_a_running_job_does_not_cost_it_its_lease(
    database_dsn: str, connection: asyncpg.Connection[Any]
) -> None:
    """`extend_leases` locks with FOR UPDATE OF job SKIP LOCKED. FOR UPDATE conflicts with FOR
    KEY SHARE, which every INSERT into a table with a foreign key to starlette_jobs(id) takes on
    the job's row (here: the job logging rows about itself in its own transaction). The
    heartbeat skips the row ('lease not renewed this round: another transaction holds its row
    locked') for as long as that transaction lasts; past the lease, the rescue takes the job
    the moment the transaction commits, while it still runs fine; the heartbeat then cancels
    the healthy copy. Measured: a job that runs fine is run 3 times and ends `failed` with
    'lease expired' on every attempt. The renewal
    only updates non-key columns: FOR NO KEY UPDATE would not conflict with KEY SHARE (and
    neither does the outcome write, an UPDATE of non-key columns)."""
    await connection.execute(
        "CREATE TABLE review_job_log (job_id bigint REFERENCES starlette_jobs (id))"
    )
    lease = 3.0
    async with (
        Jobs(database_dsn, queues={"fk": 1}, lease_duration=lease, poll_interval=0.2) as jobs,
        # Another worker of the cluster, on another queue, whose upkeep rescues often.
        Jobs(database_dsn, queues={"other": 1}, lease_duration=0.3, poll_interval=0.2),
    ):
        job_id = await writes_rows_about_itself.enqueue(dsn=database_dsn, hold=4.0, after=2.0)
        await eventually(lambda: _finished(connection, job_id), "the job", timeout=30)
        record = await jobs.get(job_id)
    assert record is not None
    print(record.status, record.attempts, record.errors, ran)
    assert ran == ["fk:1"], record.errors
    assert (record.status, record.attempts) == (JobStatus.SUCCEEDED, 1)


async def test_too_many_connections_at_start_is_an_outage_not_a_crash(
    database_dsn: str, connection: asyncpg.Connection[Any]
) -> None:
    """With require_database=False (the default) the app is meant to start anyway while
    PostgreSQL cannot take it, and retry in the background. 'too many connections' (53300)
    is neither in DATABASE_ERRORS nor a ConfigurationError: `__aenter__`'s `except
    BaseException` closes the store and re-raises asyncpg's raw TooManyConnectionsError, and
    the app fails to start."""
    role = f"sj_review_{os.getpid()}_{int(time.time() * 1000) % 10**9}"
    await connection.execute(f"CREATE ROLE {role} LOGIN CONNECTION LIMIT 0")
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(database_dsn)
    netloc = parts.netloc.rpartition("@")[2]
    dsn = urlunsplit(parts._replace(netloc=f"{role}@{netloc}"))
    jobs = Jobs(dsn, queues={})
    try:
        await jobs.__aenter__()
    except Exception as error:
        pytest.fail(f"start raised {type(error).__module__}.{type(error).__name__}: {error}")
    await jobs.__aexit__(None, None, None)


# -- 8: a database that takes no new connections answers the on-success write 500 --------------


@pytest.mark.parametrize("unique_key", [None, "order-1"], ids=["lane", "pool"])
async def test_a_database_refusing_connections_at_the_on_success_write_answers_503(
    server_dsn: str, database_dsn: str, unique_key: str | None
) -> None:
    """docs/requests.md: the client gets a 503 with Retry-After when the database is
    unavailable. With ALLOW_CONNECTIONS false (and the sessions ended), a new connection is
    refused with ObjectNotInPrerequisiteStateError, which no module counted as unavailable: the
    write of the request's jobs (on a new pool connection for a keyed batch, on the producer's
    connection opened again otherwise) answered 500 without Retry-After, as asyncpg's error."""
    outage = contextlib.AsyncExitStack()

    async def handler(request: Request) -> Response:
        held = once.configure(on_success=True, unique_key=unique_key)
        job_id = await held.enqueue(key="written at the response")  # its id, reserved
        await outage.enter_async_context(database_refusing_connections(server_dsn, database_dsn))
        return JSONResponse({"job_id": job_id}, status_code=202)

    app = Starlette(
        routes=[Route("/orders", handler, methods=["POST"])],
        middleware=[Middleware(OnSuccessMiddleware)],
    )
    transport = httpx2.ASGITransport(app=app, raise_app_exceptions=False)
    async with Jobs(database_dsn, queues={}) as jobs:
        async with outage, httpx2.AsyncClient(transport=transport, base_url="http://t") as client:
            response = await client.post("/orders")
        assert (response.status_code, response.headers.get("retry-after")) == (503, "1")
        assert await jobs.list() == []  # nothing written: the client must try again


async def test_a_read_only_database_is_unavailable_not_the_drivers_error(
    database_dsn: str, connection: asyncpg.Connection[Any]
) -> None:
    """After a failover a DSN may reach a standby for a while, and an operator may make a
    database read-only for maintenance: PostgreSQL refuses every write ("cannot execute INSERT
    in a read-only transaction"). That is the database unavailable for now, as an outage is
    (a 503 with `Retry-After` to a request, a later try to the worker), not asyncpg's
    ReadOnlySQLTransactionError; once writes are taken again, the enqueue goes through."""
    database = await connection.fetchval("SELECT current_database()")
    await connection.execute(f'ALTER DATABASE "{database}" SET default_transaction_read_only = on')
    try:
        async with Jobs(database_dsn, queues={}, migrate=False) as jobs:
            with pytest.raises(DatabaseUnavailableError, match="read-only"):
                await jobs.enqueue(once, key="refused")
            await connection.execute(
                f'ALTER DATABASE "{database}" RESET default_transaction_read_only'
            )
            await jobs._ready_store.expire_connections()  # as after the standby's promotion
            assert await jobs.enqueue(once, key="taken")
    finally:
        await connection.execute(f'ALTER DATABASE "{database}" RESET default_transaction_read_only')
