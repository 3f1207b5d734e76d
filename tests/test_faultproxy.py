"""The fault proxy itself: it forwards, a blackhole holds a query until healed (new connections
too), a reset reaches the client as a dropped connection, and connections can be told apart."""

from __future__ import annotations

import asyncio
import time
from typing import Any
from urllib.parse import urlsplit

import asyncpg
import pytest

from tests.faultproxy import FaultProxy, opened_before, ran


async def test_forwards_and_reads_the_startup_parameters(fault_proxy: FaultProxy) -> None:
    connection: asyncpg.Connection[Any] = await asyncpg.connect(
        fault_proxy.dsn, server_settings={"application_name": "probe"}
    )
    try:
        assert await connection.fetchval("SELECT $1::int + 1", 41) == 42
        await connection.execute("LISTEN somewhere")
    finally:
        await connection.close()
    (proxied,) = [c for c in fault_proxy.connections if c.kind == "startup"]
    assert proxied.application_name == "probe"
    assert "/" + proxied.parameters["database"] == urlsplit(fault_proxy.target_dsn).path
    assert proxied.ran("SELECT $1::int + 1")
    assert ran("LISTEN somewhere")(proxied)


async def test_a_blackhole_holds_a_query_until_healed(fault_proxy: FaultProxy) -> None:
    connection: asyncpg.Connection[Any] = await asyncpg.connect(fault_proxy.dsn)
    try:
        fault_proxy.blackhole()
        query = asyncio.create_task(connection.fetchval("SELECT 1"))
        done, _ = await asyncio.wait([query], timeout=1.0)
        assert not done, "the query got through a blackhole"
        # A new connection hangs too: accepted, then nothing forwarded.
        with pytest.raises(TimeoutError):
            await asyncpg.connect(fault_proxy.dsn, timeout=1.0)
        fault_proxy.heal()
        assert await asyncio.wait_for(query, timeout=5) == 1
        assert not connection.is_closed()
    finally:
        await connection.close()


async def test_a_blackhole_of_old_connections_lets_new_ones_through(
    fault_proxy: FaultProxy,
) -> None:
    old: asyncpg.Connection[Any] = await asyncpg.connect(fault_proxy.dsn)
    fault_proxy.blackhole(where=opened_before(time.monotonic()))
    new: asyncpg.Connection[Any] = await asyncpg.connect(fault_proxy.dsn, timeout=5)
    try:
        assert await new.fetchval("SELECT 2", timeout=5) == 2
        with pytest.raises(TimeoutError):
            await old.fetchval("SELECT 1", timeout=1.0)
    finally:
        old.terminate()
        await new.close()


async def test_a_blackhole_at_a_statement_holds_it_and_what_follows(
    fault_proxy: FaultProxy,
) -> None:
    connection: asyncpg.Connection[Any] = await asyncpg.connect(fault_proxy.dsn)
    try:
        fault_proxy.blackhole_at("SELECT 'marked'")
        assert await connection.fetchval("SELECT 1") == 1  # other statements flow
        query = asyncio.create_task(connection.fetchval("SELECT 'marked'"))
        done, _ = await asyncio.wait([query], timeout=1.0)
        assert not done, "the marked statement got through"
        fault_proxy.heal()
        assert await asyncio.wait_for(query, timeout=5) == "marked"
        assert await connection.fetchval("SELECT 'marked'") == "marked"  # healed: no trap
    finally:
        await connection.close()


async def test_a_reset_drops_the_connection_on_the_client(fault_proxy: FaultProxy) -> None:
    connection: asyncpg.Connection[Any] = await asyncpg.connect(fault_proxy.dsn)
    try:
        assert await connection.fetchval("SELECT 1") == 1
        assert len(fault_proxy.reset()) == 1
        with pytest.raises((ConnectionError, asyncpg.ConnectionDoesNotExistError)):
            await connection.fetchval("SELECT 1", timeout=5)
    finally:
        connection.terminate()


async def test_latency_is_added_each_way(fault_proxy: FaultProxy) -> None:
    connection: asyncpg.Connection[Any] = await asyncpg.connect(fault_proxy.dsn)
    try:
        await connection.fetchval("SELECT 1")
        fault_proxy.set_delay(0.2)
        started = time.monotonic()
        await connection.fetchval("SELECT 1")
        assert time.monotonic() - started >= 0.4
    finally:
        await connection.close()
