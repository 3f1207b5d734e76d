"""A lane (`_lanes`): one caller at a time on its own connection, the pool for the next, and
the watchdog that ends a statement that gets no answer. The lanes under every fault a network
can bring are in integration/test_silent_network.py."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from starlette_jobs import DatabaseUnavailableError
from starlette_jobs.postgres._lanes import Lane
from tests.faultproxy import FaultProxy


async def no_pool(*_: object, **__: object) -> Any:
    raise AssertionError("a lane used by one caller at a time never falls back to the pool")


async def nothing() -> None:
    return None


async def test_a_lane_cuts_a_statement_that_gets_no_answer_and_works_again_after(
    fault_proxy: FaultProxy,
) -> None:
    """The lane keeps a statement's time with one watchdog timer, not the driver's: after many
    quick statements (each moving the deadline on), a silent one still ends in time (the
    store's callers see `DatabaseUnavailableError`), and the next statement opens a new
    connection and runs."""
    lost: list[str] = []

    async def on_connection_lost() -> None:
        lost.append("lost")

    lane = Lane(fault_proxy.dsn, "test", 1.0, no_pool, on_connection_lost)
    try:
        for n in range(50):
            assert await lane.fetchval("SELECT $1::int", n) == n
        fault_proxy.blackhole()
        started = time.monotonic()
        with pytest.raises(DatabaseUnavailableError, match="no answer within 1 s"):
            await lane.fetchval("SELECT 1")
        waited = time.monotonic() - started
        assert 0.9 < waited < 2.0, waited
        assert lost == ["lost"]

        fault_proxy.heal()
        assert await lane.fetchval("SELECT 2") == 2
    finally:
        fault_proxy.heal()
        lane.terminate()


async def test_a_caller_cancelled_as_the_watchdog_cuts_its_statement_is_cancelled(
    fault_proxy: FaultProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stop that cancels the caller in the moment the watchdog cuts its silent statement:
    the caller ends cancelled, not with the timeout's `DatabaseUnavailableError`, which a
    worker's loop takes for an outage to wait out, going on after its stop."""
    lane = Lane(fault_proxy.dsn, "test", 0.3, no_pool, nothing)
    look = lane._look_at_statement_in_flight

    def look_then_cancel() -> None:
        look()
        if lane._cut_for_silence is not None:
            caller.cancel()

    monkeypatch.setattr(lane, "_look_at_statement_in_flight", look_then_cancel)
    try:
        assert await lane.fetchval("SELECT 1") == 1
        fault_proxy.blackhole()
        caller = asyncio.ensure_future(lane.fetchval("SELECT 2"))
        outcome: object
        [outcome] = await asyncio.gather(caller, return_exceptions=True)
        assert isinstance(outcome, asyncio.CancelledError), f"cancel swallowed: {outcome!r}"
    finally:
        fault_proxy.heal()
        lane.terminate()


async def test_a_second_caller_goes_to_the_pool_while_the_lane_is_busy(database_dsn: str) -> None:
    pooled: list[str] = []

    async def pool(method: str, query: str, *args: object, timeout: float) -> Any:
        pooled.append(query)
        return "from the pool"

    lane = Lane(database_dsn, "test", 5.0, pool, nothing)
    try:
        busy = asyncio.create_task(lane.fetchval("SELECT pg_sleep(0.2)"))
        await asyncio.sleep(0)  # the first caller has the lane now
        assert await lane.fetchval("SELECT 2") == "from the pool"
        await busy
        assert await lane.fetchval("SELECT 3") == 3
        assert pooled == ["SELECT 2"]
    finally:
        await lane.close()


async def test_terminating_a_lane_cuts_a_connection_it_was_closing_even_before_that_began(
    database_dsn: str,
) -> None:
    """A connection given up gracefully is closed by a task of its own; `terminate` cancels
    that task. Cancelled before its first step, the task never runs at all: the lane cuts the
    connection itself, or it would stay open, the server's backend with it."""
    lane = Lane(database_dsn, "test", 5.0, no_pool, nothing)
    assert await lane.fetchval("SELECT 1") == 1
    connection = lane._connection
    assert connection is not None
    lane._retire(connection, gracefully=True)  # as when a caller gave up on a statement
    lane.terminate()  # before the closing task took a step
    assert connection.is_closed()
