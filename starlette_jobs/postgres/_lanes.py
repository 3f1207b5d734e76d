"""A lane: a connection of its own for one hot path (enqueue, claims, outcomes, leases), with
the pool to fall back on when it is busy, and a watchdog for statements that get no answer."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeAlias

from ._connections import Connection, Pool, Record, connect
from ._driver_errors import PostgresError, never_sent, no_answer, raise_as_store_error

Executor: TypeAlias = "Connection | Pool | Lane"
"""Anything a statement can run on."""


class Lane:
    """A connection of its own for one hot path, used by one caller at a time; a caller that
    finds it busy goes to the pool instead, through `pooled`. Opened on first use (a process
    that never enqueues never opens the producer's), and again after it was lost or abandoned.
    Statements run on it one at a time, outside any transaction, so it keeps no state between
    them.

    Its errors are the library's (`DatabaseUnavailableError`...: see `_driver_errors.unavailable`).
    A statement that gets no answer within `statement_timeout` ends so, its connection cut.
    The lane keeps that time itself, with one timer that looks at the statement in flight,
    rather than through the driver's per-statement timeout: that one arms and cancels a timer
    for every statement, which cost about 13 us of client CPU time per statement, a sixth of a
    whole enqueue's (`benchmarks/enqueue_cpu.py` shows what the lane and the rest of an enqueue
    cost over the raw-SQL limit).
    """

    def __init__(
        self,
        dsn: str,
        purpose: str,
        statement_timeout: float,
        pooled: Callable[..., Awaitable[Any]],
        on_connection_lost: Callable[[], Awaitable[None]],
        extra_settings: dict[str, str] | None = None,
        *,
        schema: str | None = None,
    ) -> None:
        self._dsn = dsn
        self._schema = schema  # named by the error of a statement on tables that are not there
        self._purpose = purpose
        self._statement_timeout = statement_timeout
        self._pooled = pooled
        self._on_connection_lost = on_connection_lost
        self._extra_settings = extra_settings
        self._connection: Connection | None = None
        self._expired = False
        self._lock = asyncio.Lock()
        # Connections being closed in the background, by the task that closes each.
        self._closing: dict[asyncio.Task[None], Connection] = {}
        # The statement in flight: when its time is up, on which connection. The watchdog
        # timer is armed while a statement runs, at most one at a time.
        self._deadline = 0.0
        self._in_flight: Connection | None = None
        self._watchdog: asyncio.TimerHandle | None = None
        self._cut_for_silence: Connection | None = None

    # Not coroutines themselves: each level of coroutines between a caller and the driver is
    # walked again every time the statement's answer resumes the caller.
    def fetch(self, query: str, *args: Any) -> Coroutine[Any, Any, list[Record]]:
        return self._run("fetch", query, args)

    def fetchval(self, query: str, *args: Any) -> Coroutine[Any, Any, Any]:
        return self._run("fetchval", query, args)

    async def _run(self, method: str, query: str, args: tuple[Any, ...]) -> Any:
        """`connection.<method>(query, *args)` on this lane's connection, or the pool's."""
        if self._lock.locked():
            return await self._pooled(method, query, *args, timeout=self._statement_timeout)
        async with self._lock:
            for attempt in range(2):
                connection = await self._connected()
                self._watch(connection)
                try:
                    return await getattr(connection, method)(query, *args)
                except BaseException as caught:
                    error = self._silence_as_timeout(connection, caught)
                    if isinstance(error, asyncio.CancelledError):
                        # The caller gave up (shutdown): asyncpg sends the server a cancel
                        # request, which closing (not terminating) lets go out first.
                        self._retire(connection, gracefully=True)
                    elif no_answer(error) or not isinstance(error, PostgresError):
                        # Gone, silent, or mid-way through who knows what: cut it at once, so
                        # that nothing it held back can still reach the server (a claim that
                        # arrives late would commit behind the worker's back).
                        self._retire(connection, gracefully=False)
                    if no_answer(error):
                        await self._on_connection_lost()  # the others are likely gone too
                    if error is not caught:
                        error.__cause__ = caught
                        raise_as_store_error(error, schema=self._schema)
                    if attempt or not never_sent(error):
                        raise_as_store_error(error, schema=self._schema)
                finally:
                    self._in_flight = self._cut_for_silence = None
            raise AssertionError("unreachable: the second try returns or raises")

    def _watch(self, connection: Connection) -> None:
        """Starts the clock of a statement about to run on `connection`."""
        loop = asyncio.get_running_loop()
        self._deadline = loop.time() + self._statement_timeout
        self._in_flight = connection
        if self._watchdog is None:
            self._watchdog = loop.call_at(self._deadline, self._look_at_statement_in_flight)

    def _look_at_statement_in_flight(self) -> None:
        """The watchdog: cuts the connection of a statement past its deadline, else sleeps
        until the deadline of the one in flight (if any)."""
        self._watchdog = None
        connection = self._in_flight
        if connection is None:
            return
        loop = asyncio.get_running_loop()
        if loop.time() < self._deadline:
            self._watchdog = loop.call_at(self._deadline, self._look_at_statement_in_flight)
            return
        self._cut_for_silence = connection
        connection.terminate()  # the statement's caller gets the error, `_run` the TimeoutError

    def _silence_as_timeout(self, connection: Connection, error: BaseException) -> BaseException:
        """`error`, or a `TimeoutError` if the watchdog cut `connection` for want of an answer.
        A cancellation stays one: the caller's stop must not be taken for a timeout."""
        if self._cut_for_silence is not connection or isinstance(error, asyncio.CancelledError):
            return error
        self._cut_for_silence = None
        return TimeoutError(
            f"PostgreSQL gave no answer within {self._statement_timeout:g} s; connection cut"
        )

    def _retire(self, connection: Connection, *, gracefully: bool) -> None:
        if self._connection is connection:
            self._connection = None
        if not gracefully:
            connection.terminate()
            return
        # A statement its caller gave up on may still run on the server. asyncpg sends a cancel
        # request for it; terminating the connection now would drop that request, so close it
        # in the background instead.
        task = asyncio.create_task(self._close_quietly(connection))
        self._closing[task] = connection
        task.add_done_callback(self._closed)

    def _closed(self, task: asyncio.Task[None]) -> None:
        del self._closing[task]

    async def _close_quietly(self, connection: Connection) -> None:
        try:
            await asyncio.wait_for(connection.close(), self._statement_timeout)
        except asyncio.CancelledError:
            connection.terminate()
            raise
        except Exception:  # the network is gone: the server ends the statement on its own
            connection.terminate()

    def expire(self) -> None:
        """Open a new connection on next use: another one found the server gone."""
        self._expired = True

    async def _connected(self) -> Connection:
        if self._expired and self._connection is not None:
            self._retire(self._connection, gracefully=False)
        self._expired = False
        if self._connection is None or self._connection.is_closed():
            self._connection = await connect(
                self._dsn,
                self._statement_timeout,
                self._purpose,
                self._extra_settings,
                client_timeout=False,  # the lane's watchdog keeps the time
            )
        return self._connection

    async def close(self) -> None:
        async with self._lock:
            connection, self._connection = self._connection, None
            if connection is not None and not connection.is_closed():
                await connection.close(timeout=self._statement_timeout)
        if self._watchdog is not None:
            self._watchdog.cancel()
            self._watchdog = None
        if self._closing:
            await asyncio.wait(list(self._closing), timeout=self._statement_timeout)

    def terminate(self) -> None:
        if self._connection is not None:
            self._connection.terminate()
        for task, closing in self._closing.items():
            task.cancel()
            # Cancelled before its first step, the task would never run its own `terminate`.
            closing.terminate()
        if self._watchdog is not None:
            self._watchdog.cancel()
            self._watchdog = None
