"""`postgres/_connections.py`, on a real PostgreSQL: a connection's server gives a statement up
before its client does, a refused connection is the library's error, the shared pool replaces
its connections once expired, and a statement that gets no answer is cut in time. How the
driver's errors are classified is in test_driver_errors.py; the LISTEN connection's own tests
are in test_listener.py."""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

import asyncpg
import pytest

from starlette_jobs import DatabaseUnavailableError
from starlette_jobs.postgres._connections import (
    SharedPool,
    TransactionRolledBackError,
    answered_within,
    connect,
)
from starlette_jobs.postgres._driver_errors import unavailable
from starlette_jobs.postgres._listener import Listener, channel_for
from tests.conftest import eventually
from tests.faultproxy import FaultProxy


async def test_the_server_gives_a_statement_up_before_the_client_does(database_dsn: str) -> None:
    connection = await connect(database_dsn, 10.0, "claims", {"search_path": "billing, public"})
    try:
        shown = await connection.fetchrow(
            "SELECT current_setting('statement_timeout') AS server,"
            " current_setting('application_name') AS name,"
            " current_setting('search_path') AS path"
        )
    finally:
        await connection.close()
    assert shown is not None
    assert dict(shown) == {
        "server": "8s",
        "name": "starlette_jobs claims",
        "path": "billing, public",
    }


async def test_a_refused_connection_is_the_librarys_error() -> None:
    with pytest.raises(DatabaseUnavailableError, match="unreachable") as raised:
        await connect("postgresql://app@127.0.0.1:1/app", 1.0, "claims")
    assert isinstance(raised.value.__cause__, OSError)  # the driver's, for the log


async def test_an_expired_pool_opens_new_connections(database_dsn: str) -> None:
    pool = await SharedPool.open(database_dsn, min_size=1, max_size=1, statement_timeout=5.0)
    try:
        first = await pool.run("fetchval", "SELECT pg_backend_pid()")
        assert await pool.run("fetchval", "SELECT pg_backend_pid()") == first
        pool.expire()
        replaced = await pool.run("fetchval", "SELECT pg_backend_pid()")
        assert replaced != first
        assert await pool.run("fetchval", "SELECT pg_backend_pid()") == replaced
    finally:
        await pool.pool.close()


async def test_a_statement_the_server_gave_up_leaves_its_connection_in_use(
    database_dsn: str,
) -> None:
    """The server gives a statement up before the client stops waiting: the caller hears the
    server's error, and the connection, which answered, serves the next caller. (One that
    gave no answer is cut instead: the silent statements below.)"""
    pool = await SharedPool.open(database_dsn, min_size=1, max_size=1, statement_timeout=5.0)
    try:
        first = await pool.run("fetchval", "SELECT pg_backend_pid()")
        with pytest.raises(asyncpg.QueryCanceledError):
            await pool.run("execute", "SELECT pg_sleep(2)", timeout=0.2)
        assert await pool.run("fetchval", "SELECT pg_backend_pid()") == first
    finally:
        await pool.pool.close()


async def test_a_pool_statement_given_its_own_time_ends_on_the_server_with_it(
    database_dsn: str,
) -> None:
    """A worker's statements on the pool keep the worker's time (a third of its lease), not
    the pool's. The server gave each up at 80 % of the pool's time all the same: one the worker
    had stopped waiting for (say, behind an operator's LOCK TABLE) went on waiting on the server,
    a backend more for each, and could still commit behind the worker's back. Now the server
    gives it up with the client's own time, shorter or longer, and the next caller of the
    connection has the pool's again."""
    pool = await SharedPool.open(database_dsn, min_size=1, max_size=1, statement_timeout=5.0)
    try:
        shown = "SELECT current_setting('statement_timeout')"
        assert await pool.run("fetchval", shown, timeout=10.0) == "8s"
        assert await pool.run("fetchval", shown) == "4s"
        async with pool.transaction(timeout=1.0) as transaction:
            assert await transaction.fetchval(shown) == "800ms"
        assert await pool.run("fetchval", shown) == "4s"
        with pytest.raises(asyncpg.QueryCanceledError):  # by the server: it ended there
            await pool.run("execute", "SELECT pg_sleep(4)", timeout=1.0)
    finally:
        await pool.pool.close()


async def test_a_silent_pool_statement_gives_up_in_time_without_a_cancel_request(
    fault_proxy: FaultProxy,
) -> None:
    pool = await SharedPool.open(fault_proxy.dsn, min_size=1, max_size=1, statement_timeout=5.0)
    try:
        first = await pool.run("fetchval", "SELECT pg_backend_pid()")
        fault_proxy.blackhole(where=lambda connection: True)  # those open now; new ones pass
        started = time.monotonic()
        with pytest.raises(TimeoutError):
            await pool.run("fetchval", "SELECT 1", timeout=0.3)
        waited = time.monotonic() - started
        assert await pool.run("fetchval", "SELECT pg_backend_pid()") != first
    finally:
        await pool.pool.close()
    assert waited < 2
    assert [c for c in fault_proxy.connections if c.kind == "cancel"] == []


async def test_a_caller_cancelled_while_its_cut_statement_winds_down_is_cancelled(
    fault_proxy: FaultProxy,
) -> None:
    """A shutdown that cancels a task just as its silent statement was cut: the task must end
    cancelled, not go on as if the statement had timed out (a loop that retries on a timeout
    would then never stop, and the shutdown would hang)."""
    listener = await Listener.open(fault_proxy.dsn, 5.0, {channel_for("emails"): print})
    connection = listener._connection
    assert await listener.alive(timeout=5)
    fault_proxy.blackhole(where=lambda c: True)
    cancelled: list[bool] = []

    class CancelledAsItIsCut:
        def terminate(self) -> None:
            connection.terminate()
            asyncio.get_running_loop().call_soon(lambda: cancelled.append(caller.cancel()))

    caller = asyncio.ensure_future(
        answered_within(CancelledAsItIsCut(), connection.execute("SELECT 1"), 0.3)  # type: ignore[arg-type]
    )
    [outcome] = await asyncio.gather(caller, return_exceptions=True)
    await listener.close()
    assert cancelled == [True]  # the cancel reached the caller while it still waited
    assert isinstance(outcome, asyncio.CancelledError), f"cancel swallowed: {outcome!r}"


async def test_a_caller_cancelled_while_its_connection_is_handed_back_is_cancelled(
    database_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stop that cancels a task while its answered statement's connection goes back to the
    pool: the pool has already taken the connection from its proxy, which refuses every call,
    `terminate` included. The task must end cancelled: it returned the statement's answer
    instead, and a worker's loop around it (upkeep, the queues' controls) never stopped, so
    the shutdown hung (seen in 1 stop of about 30, two workers starting and stopping)."""
    pool = await SharedPool.open(database_dsn, min_size=1, max_size=1, statement_timeout=5.0)
    release = asyncpg.pool.Pool.release
    handed_back = asyncio.Event()

    async def release_then_linger(self: Any, connection: Any, **kwargs: Any) -> None:
        await release(self, connection, **kwargs)  # the proxy is empty from here on
        handed_back.set()
        await asyncio.sleep(0.2)  # what is left of asyncpg's release, made long enough to land in

    monkeypatch.setattr(asyncpg.pool.Pool, "release", release_then_linger)
    caller = asyncio.ensure_future(pool.run("fetchval", "SELECT 1"))
    await handed_back.wait()
    caller.cancel()
    outcome: object
    [outcome] = await asyncio.gather(caller, return_exceptions=True)
    monkeypatch.undo()
    try:
        assert isinstance(outcome, asyncio.CancelledError), f"cancel swallowed: {outcome!r}"
        assert await pool.run("fetchval", "SELECT 2") == 2  # the pool still works
    finally:
        await pool.pool.close()


async def test_a_silent_transaction_gives_up_in_time_without_a_cancel_request(
    fault_proxy: FaultProxy,
) -> None:
    """A statement of a transaction (a workflow's retry, a bulk batch, a schedule's tick) on a
    connection gone silent: cut within its timeout, like a single statement, and not handed
    back; no cancel request tries to cross the silent network."""
    pool = await SharedPool.open(fault_proxy.dsn, min_size=1, max_size=1, statement_timeout=5.0)

    async def silent_midway() -> None:
        async with pool.transaction(timeout=0.3) as connection:
            assert await connection.fetchval("SELECT 1") == 1
            fault_proxy.blackhole(where=lambda connection: True)
            await connection.execute("SELECT 2")

    try:
        first = await pool.run("fetchval", "SELECT pg_backend_pid()")
        started = time.monotonic()
        with pytest.raises(TimeoutError):
            await silent_midway()
        waited = time.monotonic() - started
        assert await pool.run("fetchval", "SELECT pg_backend_pid()") != first
    finally:
        await pool.pool.close()
    assert waited < 2
    assert [c for c in fault_proxy.connections if c.kind == "cancel"] == []


async def test_a_transaction_commits_what_it_did_and_rolls_back_on_an_error(
    database_dsn: str, connection: asyncpg.Connection[Any]
) -> None:
    await connection.execute("DROP TABLE IF EXISTS tx_seen; CREATE TABLE tx_seen (n int)")
    pool = await SharedPool.open(database_dsn, min_size=1, max_size=1, statement_timeout=5.0)

    async def insert(*values: int, then_fail: bool = False) -> None:
        async with pool.transaction() as tx:
            for value in values:
                await tx.execute("INSERT INTO tx_seen VALUES ($1)", value)
            if then_fail:
                raise ZeroDivisionError

    try:
        await insert(1)
        with pytest.raises(ZeroDivisionError):
            await insert(2, then_fail=True)
        await connection.execute("CREATE UNIQUE INDEX ON tx_seen (n)")
        with pytest.raises(asyncpg.UniqueViolationError):
            await insert(3, 1)  # the second insert fails: the first is rolled back with it
        assert await pool.run("fetch", "SELECT n FROM tx_seen ORDER BY n") == [(1,)]
        # Handed back out of any transaction, the one connection serves the next caller.
        assert await pool.run("fetchval", "SELECT count(*) FROM tx_seen") == 1
    finally:
        await pool.pool.close()
        await connection.execute("DROP TABLE tx_seen")


async def test_a_transaction_whose_block_swallowed_a_server_error_does_not_pass_for_committed(
    database_dsn: str, connection: asyncpg.Connection[Any]
) -> None:
    # After an error, PostgreSQL rolls the whole transaction back at COMMIT and answers
    # "ROLLBACK", not an error: a block that caught the error and ended normally would lose
    # what it wrote before it, unheard.
    await connection.execute("DROP TABLE IF EXISTS tx_lost; CREATE TABLE tx_lost (n int UNIQUE)")
    await connection.execute("INSERT INTO tx_lost VALUES (1)")
    pool = await SharedPool.open(database_dsn, min_size=1, max_size=1, statement_timeout=5.0)

    async def write_two_swallowing_the_second() -> None:
        async with pool.transaction() as tx:
            await tx.execute("INSERT INTO tx_lost VALUES (2)")
            with contextlib.suppress(asyncpg.UniqueViolationError):
                await tx.execute("INSERT INTO tx_lost VALUES (1)")

    try:
        with pytest.raises(TransactionRolledBackError, match="rolled back"):
            await write_two_swallowing_the_second()
        assert await pool.run("fetch", "SELECT n FROM tx_lost ORDER BY n") == [(1,)]
    finally:
        await pool.pool.close()
        await connection.execute("DROP TABLE tx_lost")


async def test_a_transaction_committed_as_its_connection_goes_silent_is_told_so_in_time(
    fault_proxy: FaultProxy, connection: asyncpg.Connection[Any]
) -> None:
    """The network goes silent once COMMIT was answered, before the pool's reset of the
    connection (`RESET ALL`, on its way back to the pool) is: the caller learns that its
    transaction committed within its own timeout, not an error after the pool's longer one
    (which a caller would take for a transaction that may not have happened)."""
    await connection.execute("CREATE TABLE tx_done (n int)")
    pool = await SharedPool.open(fault_proxy.dsn, min_size=1, max_size=1, statement_timeout=5.0)
    try:
        fault_proxy.blackhole_at("RESET ALL")
        started = time.monotonic()
        async with pool.transaction(timeout=0.3) as tx:
            await tx.execute("INSERT INTO tx_done VALUES (1)")
        waited = time.monotonic() - started
        fault_proxy.heal()
        assert await pool.run("fetchval", "SELECT count(*) FROM tx_done") == 1
    finally:
        fault_proxy.heal()
        await pool.pool.close()
    assert waited < 2
    assert [c for c in fault_proxy.connections if c.kind == "cancel"] == []


async def test_a_statement_answered_as_its_connection_goes_silent_returns_in_time(
    fault_proxy: FaultProxy, connection: asyncpg.Connection[Any]
) -> None:
    """The same for a single statement: its answer is the caller's within its timeout, though
    the connection goes silent before the pool's reset of it; the connection is cut."""
    await connection.execute("CREATE TABLE run_done (n int)")
    pool = await SharedPool.open(fault_proxy.dsn, min_size=1, max_size=1, statement_timeout=5.0)
    try:
        first = await pool.run("fetchval", "SELECT pg_backend_pid()")
        fault_proxy.blackhole_at("RESET ALL")
        started = time.monotonic()
        assert await pool.run("execute", "INSERT INTO run_done VALUES (1)", timeout=0.3)
        waited = time.monotonic() - started
        fault_proxy.heal()
        assert await pool.run("fetchval", "SELECT pg_backend_pid()") != first
        assert await connection.fetchval("SELECT count(*) FROM run_done") == 1
    finally:
        fault_proxy.heal()
        await pool.pool.close()
    assert waited < 2
    assert [c for c in fault_proxy.connections if c.kind == "cancel"] == []


async def test_a_transaction_whose_rollback_gets_no_answer_raises_its_own_error(
    fault_proxy: FaultProxy, connection: asyncpg.Connection[Any]
) -> None:
    """A key taken (a unique violation, which the store's callers catch by name) and then no
    answer to the ROLLBACK: the caller hears of the key, in time; nothing was committed (the
    connection is cut, and the server rolls back what it had), so a timeout would only hide
    what happened."""
    await connection.execute("CREATE TABLE tx_keys (n int UNIQUE); INSERT INTO tx_keys VALUES (1)")
    pool = await SharedPool.open(fault_proxy.dsn, min_size=1, max_size=1, statement_timeout=5.0)

    async def take_a_key_taken() -> None:
        async with pool.transaction(timeout=0.3) as tx:
            await tx.execute("INSERT INTO tx_keys VALUES (2)")
            await tx.execute("INSERT INTO tx_keys VALUES (1)")

    try:
        fault_proxy.blackhole_at("ROLLBACK")
        started = time.monotonic()
        with pytest.raises(asyncpg.UniqueViolationError):
            await take_a_key_taken()
        waited = time.monotonic() - started
        fault_proxy.heal()
        assert await pool.run("fetchval", "SELECT count(*) FROM tx_keys") == 1
    finally:
        fault_proxy.heal()
        await pool.pool.close()
    assert waited < 2
    assert [c for c in fault_proxy.connections if c.kind == "cancel"] == []


async def test_a_transaction_its_process_stopped_in_is_ended_by_the_server_with_its_locks(
    database_dsn: str, connection: asyncpg.Connection[Any]
) -> None:
    """A process stopped in the middle of one of the library's transactions (SIGSTOP, a paused
    VM, an event loop a job blocks), here a block that waits between its statements: the
    server ends the session once it has been idle in its transaction for as long as a
    statement may take, and the row it locked is free for the others (a worker's tick of that
    schedule, every claim of a limited queue). It held the lock until the process resumed."""
    await connection.execute("DROP TABLE IF EXISTS tx_held; CREATE TABLE tx_held (n int)")
    await connection.execute("INSERT INTO tx_held VALUES (1)")
    pool = await SharedPool.open(database_dsn, min_size=1, max_size=1, statement_timeout=1.0)
    resumed = asyncio.Event()

    async def stopped_mid_transaction() -> None:
        async with pool.transaction() as tx:
            await tx.execute("UPDATE tx_held SET n = 2")
            await resumed.wait()  # as a stopped process: no next statement
            await tx.execute("SELECT 1")

    async def row_free() -> bool:
        async with connection.transaction():
            locked = await connection.fetch("SELECT FROM tx_held FOR UPDATE SKIP LOCKED")
        return bool(locked)

    holder = asyncio.create_task(stopped_mid_transaction())
    try:
        await eventually(lambda: _locked(connection), "the row to be locked")
        await eventually(row_free, "the server to end the stopped transaction", timeout=10)
        resumed.set()
        [ended] = await asyncio.gather(holder, return_exceptions=True)
        # Its connection closed: the store's callers hear that the database was unavailable,
        # and nothing it wrote was kept.
        assert isinstance(ended, BaseException)
        assert isinstance(unavailable(ended), DatabaseUnavailableError)
        assert await connection.fetchval("SELECT n FROM tx_held") == 1
        assert await pool.run("fetchval", "SELECT count(*) FROM tx_held") == 1  # a new one
    finally:
        holder.cancel()
        await asyncio.gather(holder, return_exceptions=True)
        await pool.pool.close()
        await connection.execute("DROP TABLE tx_held")


async def _locked(connection: asyncpg.Connection[Any]) -> bool:
    async with connection.transaction():
        return not await connection.fetch("SELECT FROM tx_held FOR UPDATE SKIP LOCKED")


async def test_the_librarys_sessions_write_times_in_utc_whatever_the_databases_zone(
    database_dsn: str, connection: asyncpg.Connection[Any]
) -> None:
    """An attempt's error entry (`errors[i]["at"]`, built in SQL as JSON) was written in the
    database's or role's time zone (`+01:00` in Berlin), where the memory store writes UTC."""
    database = await connection.fetchval("SELECT current_database()")
    await connection.execute(f"ALTER DATABASE {database} SET timezone = 'Europe/Berlin'")
    pool = await SharedPool.open(database_dsn, min_size=1, max_size=1, statement_timeout=5.0)
    try:
        written = await pool.run("fetchval", "SELECT to_json(now())::text")
        assert written.endswith('+00:00"')
    finally:
        await pool.pool.close()
        await connection.execute(f"ALTER DATABASE {database} RESET timezone")
