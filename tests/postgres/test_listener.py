"""`postgres/_listener.py`, on a real PostgreSQL: the LISTEN connection hands each payload to
its channel's callback, and one whose network went silent is found so in time, without a
cancel request."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import asyncpg

from starlette_jobs.postgres._listener import Listener, channel_for
from tests.faultproxy import FaultProxy


async def test_the_listener_hands_each_payload_to_its_channels_callback(
    database_dsn: str, connection: asyncpg.Connection[Any]
) -> None:
    heard: dict[str, list[str]] = {"emails": [], "reports": []}
    both = asyncio.Event()

    def on(queue: str) -> Any:
        def call(payload: str) -> None:
            heard[queue].append(payload)
            if all(heard.values()):
                both.set()

        return call

    listener = await Listener.open(
        database_dsn, 5.0, {channel_for(queue): on(queue) for queue in heard}
    )
    try:
        await connection.execute("SELECT pg_notify($1, 'one')", channel_for("emails"))
        await connection.execute("SELECT pg_notify($1, 'two')", channel_for("reports"))
        await asyncio.wait_for(both.wait(), timeout=10)
        assert heard == {"emails": ["one"], "reports": ["two"]}
        assert await listener.alive(timeout=5)
    finally:
        await listener.close()
    assert not await listener.alive(timeout=5)


async def test_a_silent_listener_is_found_within_the_timeout_without_a_cancel_request(
    fault_proxy: FaultProxy,
) -> None:
    """A cancel request would cross the same silent network; when it failed, asyncpg left its
    error in a future nobody reads ("Future exception was never retrieved" in the app's log).
    The connection is cut instead."""
    listener = await Listener.open(fault_proxy.dsn, 5.0, {channel_for("emails"): print})
    try:
        assert await listener.alive(timeout=5)
        fault_proxy.blackhole(where=lambda connection: True)  # those open now; new ones pass
        started = time.monotonic()
        assert not await listener.alive(timeout=0.3)
        waited = time.monotonic() - started
    finally:
        await listener.close()
    assert waited < 2
    assert [c for c in fault_proxy.connections if c.kind == "cancel"] == []
