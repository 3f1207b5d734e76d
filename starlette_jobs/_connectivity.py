"""What counts as "the database is unreachable", how long to wait for it, and how long to wait
before trying again."""

from __future__ import annotations

import asyncio
import contextlib
import random
from types import TracebackType

import asyncpg

from ._errors import DatabaseUnavailableError

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
    server_ms = max(1, int(statement_timeout * _SERVER_SHARE * 1000))
    return {"statement_timeout": str(server_ms), "application_name": f"starlette_jobs {purpose}"}


# The connection is gone: the server dropped it, or the network did.
CONNECTION_LOST: tuple[type[BaseException], ...] = (
    OSError,
    asyncpg.PostgresConnectionError,
    asyncpg.InterfaceError,
    # A server that ends an idle connection (pg_terminate_backend, a restart, an idle timeout)
    # says so before it closes the socket; asyncpg leaves such a connection in an error state,
    # and it fails its next statement with this, until the closing is read.
    asyncpg.InternalClientError,
    asyncpg.exceptions.CannotConnectNowError,
    asyncpg.exceptions.AdminShutdownError,
    asyncpg.exceptions.CrashShutdownError,
    asyncpg.exceptions.ConnectionDoesNotExistError,
)
# The server is there but did not do the work in time: the statement ran past the server's
# statement_timeout (blocked by a lock, or too large), or a lock could not be had.
TOO_SLOW: tuple[type[BaseException], ...] = (
    asyncpg.exceptions.QueryCanceledError,
    asyncpg.exceptions.LockNotAvailableError,
)
# What makes a call fail for want of the database rather than for what it asked: raised as
# `DatabaseUnavailableError` to callers; the worker keeps what it has and tries again.
DATABASE_ERRORS: tuple[type[BaseException], ...] = (
    *CONNECTION_LOST,
    *TOO_SLOW,
    TimeoutError,  # no answer in time: the network went silent, or the server hangs
    asyncpg.exceptions.TooManyConnectionsError,  # e.g. old and new processes of a deploy
)


def connection_lost(error: BaseException) -> bool:
    """Whether `error` says the connection is gone (the server dropped it, or the network did),
    rather than that a statement ran out of time on a connection that may still be good."""
    # TimeoutError is an OSError: exclude it by name.
    return isinstance(error, CONNECTION_LOST) and not isinstance(error, TimeoutError)


def no_answer(error: BaseException) -> bool:
    """Whether the connection is gone or did not answer at all: it, and likely every other
    connection of the process, should be replaced."""
    return isinstance(error, (*CONNECTION_LOST, TimeoutError))


def never_sent(error: BaseException) -> bool:
    """Whether the statement failed before anything of it reached the server, so that running
    it again on a new connection cannot run it twice: asyncpg refuses to start it on a
    connection that the server already said it would end."""
    return isinstance(error, asyncpg.InternalClientError) and "cannot switch to state" in str(error)


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


class unavailable_as_error:  # lower case: used like the context-manager function it was
    """Turns the driver's connection errors into `DatabaseUnavailableError`, naming `action`.

    A class rather than a generator: every enqueue enters one, and this costs a third as much.
    """

    __slots__ = ("_action",)

    def __init__(self, action: str) -> None:
        self._action = action

    def __enter__(self) -> None:
        return None

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if error is not None and isinstance(error, DATABASE_ERRORS):
            detail = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
            if isinstance(error, TOO_SLOW):
                why = "PostgreSQL did not finish it in time (a lock held elsewhere, or too much)"
            else:
                why = "PostgreSQL is unreachable or stopped answering"
            raise DatabaseUnavailableError(f"could not {self._action}: {why} ({detail})") from error
