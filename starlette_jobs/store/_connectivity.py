"""How long to wait for the database, and how long to wait before trying it again. What counts as
"unreachable" is told by the driver's errors, in `postgres/_driver_errors.py`."""

from __future__ import annotations

import asyncio
import contextlib
import random

# Seconds to wait for a new connection: an unreachable server (a dropped route, a firewall that
# swallows packets) fails a call in this time instead of asyncpg's default minute.
CONNECT_TIMEOUT = 10.0
# Seconds a statement on an open connection may go unanswered before the client gives up on it.
# None of ours takes long, so this is what bounds a call on a network that went silent.
STATEMENT_TIMEOUT = 10.0
# The server gives a statement up at this share of the client's timeout: a statement the client
# stopped waiting for (a claim stuck behind an operator's LOCK TABLE) can then never commit
# later, behind its back.
_SERVER_SHARE = 0.8


def worker_statement_timeout(lease_duration: float) -> float:
    """The client-side timeout of a worker's statements: a third of the lease (so a silently
    dead connection is noticed, and replaced, while the leases it renews still hold), at most
    `STATEMENT_TIMEOUT` and at least one second."""
    return max(1.0, min(STATEMENT_TIMEOUT, lease_duration / 3))


def session_settings(statement_timeout: float, purpose: str) -> dict[str, str]:
    """Server settings for a connection whose statements the client waits `statement_timeout`
    seconds for. `purpose` shows in `pg_stat_activity.application_name`."""
    server_ms = server_timeout_ms(statement_timeout)
    return {
        "statement_timeout": str(server_ms),
        # A transaction of ours sends its next statement at once: one idle for as long as a
        # statement may take is a process that stopped mid-transaction (SIGSTOP, a paused VM,
        # an event loop a job blocks), whose row locks would otherwise hold every other worker
        # (a schedule's tick, a limited queue's claims) until it resumed. The server ends it.
        "idle_in_transaction_session_timeout": str(server_ms),
        # What the server writes of a time as text (an attempt's error's `at`, in JSON) is in
        # UTC, as the memory store writes it, whatever the database's or role's time zone.
        "TimeZone": "UTC",
        "application_name": f"starlette_jobs {purpose}",
    }


def server_timeout_ms(statement_timeout: float) -> int:
    """The server's `statement_timeout`, in milliseconds, for statements the client waits
    `statement_timeout` seconds for."""
    return max(1, int(statement_timeout * _SERVER_SHARE * 1000))


class Backoff:
    """Exponential backoff with jitter, from 0.1 s up to 5 s."""

    def __init__(self, first: float = 0.1, cap: float = 5.0) -> None:
        self._first = first
        self._cap = cap
        self._next = first

    def reset(self) -> None:
        self._next = self._first

    async def wait(self, interrupt: asyncio.Event | None = None) -> None:
        """Sleeps the next delay, or until `interrupt` is set (a shutdown, say)."""
        delay = self._next * (0.5 + random.random() / 2)
        self._next = min(self._next * 2, self._cap)
        if interrupt is None:
            await asyncio.sleep(delay)
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(delay):
                await interrupt.wait()
