"""The driver's (asyncpg's) connections: `connect` (for the lanes of `_lanes.py` and LISTEN's
`_listener.py`), and the shared pool for everything else (`SharedPool`). Each is opened on
first use and again after it was lost or expired, and gives a statement up on the server before
the client stops waiting for it (see `store/_connectivity.session_settings`). What the driver's
errors mean is `_driver_errors.py`'s; with it, the only modules that import the driver.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Mapping
from typing import Any, TypeAlias, TypeGuard, TypeVar, cast
from urllib.parse import urlsplit, urlunsplit

import asyncpg

from ..store._connectivity import CONNECT_TIMEOUT, server_timeout_ms, session_settings
from ._driver_errors import REFUSED_CONNECTION, no_answer, raise_as_store_error

Connection: TypeAlias = "asyncpg.Connection[Any]"
"""A connection of the driver's: what `configure(connection=...)` takes."""
Pool: TypeAlias = "asyncpg.Pool[Any]"
Record: TypeAlias = "asyncpg.Record"
T = TypeVar("T")


def is_driver_connection(candidate: object) -> TypeGuard[Connection]:
    """Whether `candidate` is an asyncpg connection (or a pool's proxy of one)."""
    return isinstance(candidate, asyncpg.Connection | asyncpg.pool.PoolConnectionProxy)


async def connect_plain(dsn: str, settings: Mapping[str, str] | None = None) -> Connection:
    """A connection without a statement timeout (migrations may take long on a large table),
    with the session `settings` (the schema's `search_path`, say)."""
    connection: asyncpg.Connection[Any] = await asyncpg.connect(
        dsn, timeout=CONNECT_TIMEOUT, server_settings=dict(settings or {})
    )
    return connection


async def run_admin_statements(dsn: str, *statements: str) -> None:
    """Runs `statements` (CREATE DATABASE, say: our own text, never a user's) one by one on the
    `postgres` database of the server `dsn` names."""
    parts = urlsplit(dsn)
    connection = await connect_plain(urlunsplit(parts._replace(path="/postgres")))
    try:
        for statement in statements:
            await connection.execute(statement)
    finally:
        await connection.close()


async def connect(
    dsn: str,
    statement_timeout: float,
    purpose: str,
    extra: dict[str, str] | None = None,
    *,
    client_timeout: bool = True,
) -> asyncpg.Connection[Any]:
    """A connection whose server gives a statement up at 80 % of `statement_timeout`, and whose
    client (unless `client_timeout` is false: the caller keeps time itself) stops waiting at
    `statement_timeout`."""
    try:
        connection: asyncpg.Connection[Any] = await asyncpg.connect(
            dsn,
            timeout=CONNECT_TIMEOUT,
            command_timeout=statement_timeout if client_timeout else None,
            server_settings={**session_settings(statement_timeout, purpose), **(extra or {})},
        )
    except Exception as error:  # its callers (a lane, a listener) see the library's errors
        raise_as_store_error(error, connecting=True)
    return connection


async def _pool_connect(*args: Any, **kwargs: Any) -> asyncpg.Connection[Any]:
    """asyncpg's connect, for the pool: a refusal that means "not now" only when connecting
    (`REFUSED_CONNECTION`) is told as such here, where it is known that the pool was
    connecting; the rest stays the driver's, for the store's `_read` and `_write` to sort."""
    try:
        connection: asyncpg.Connection[Any] = await asyncpg.connect(*args, **kwargs)
    except REFUSED_CONNECTION as error:
        raise_as_store_error(error, connecting=True)
    return connection


class _PooledConnection(asyncpg.Connection):
    """A pool connection that remembers the pool generation it was opened in."""

    generation: int | None = None

    def opened_in(self, generation: int) -> int:
        """The generation this connection belongs to: `generation` on its first use."""
        if self.generation is None:
            self.generation = generation
        return self.generation


class SharedPool:
    """asyncpg's pool, with an expiry that closes the expired connections as it meets them.

    asyncpg's own `expire_connections` closes each in a task nobody awaits, which fails loudly
    when the socket is already gone: the very case expiry is for.
    """

    def __init__(self, pool: asyncpg.Pool[Any], statement_timeout: float) -> None:
        self.pool = pool
        self._statement_timeout = statement_timeout
        self._generation = 0

    @classmethod
    async def open(
        cls,
        dsn: str,
        *,
        min_size: int,
        max_size: int,
        statement_timeout: float,
        settings: Mapping[str, str] | None = None,
    ) -> SharedPool:
        """`settings`: session settings besides the timeouts (the schema's `search_path`)."""
        pool = await asyncpg.create_pool(
            dsn,
            min_size=min_size,
            max_size=max_size,
            command_timeout=statement_timeout,
            timeout=CONNECT_TIMEOUT,
            server_settings={**session_settings(statement_timeout, "pool"), **(settings or {})},
            connection_class=_PooledConnection,
            connect=_pool_connect,
        )
        return cls(pool, statement_timeout)

    def expire(self) -> None:
        """Every connection in the pool now is replaced on its next use."""
        self._generation += 1

    async def run(self, method: str, query: str, *args: Any, timeout: float | None = None) -> Any:
        """`connection.<method>(query, *args)` on a pool connection that is not expired, given
        up after `timeout` seconds (default: the pool's). A connection that is gone, did not
        answer or whose caller gave up is closed at once, not handed back: the pool would wait
        for asyncpg's cancel request first, which cannot cross a network that went silent."""
        within = self._statement_timeout if timeout is None else timeout
        async with self._fresh(within) as connection:
            timed = TimedConnection(connection, within)
            try:
                if within != self._statement_timeout:
                    # The server gives it up with the caller's time, not the pool's: else, a
                    # statement the caller gave up on early may still commit behind its back.
                    # The pool's `RESET ALL` gives the next caller the pool's time again.
                    await timed.execute(f"SET statement_timeout = {server_timeout_ms(within)}")
                return await timed.run(method, query, *args)
            except (TimeoutError, asyncio.CancelledError):
                raise  # `answered_within` cut the connection (unless it had answered)
            except BaseException as error:
                if no_answer(error):  # gone: not handed back
                    _cut(connection)  # quietly: the error raised is the statement's
                raise

    @contextlib.asynccontextmanager
    async def transaction(self, timeout: float | None = None) -> AsyncIterator[TimedConnection]:
        """A transaction on a pool connection that is not expired, committed when the block
        ends, rolled back if it raises; each of its statements (BEGIN and COMMIT too) given up
        after `timeout` seconds (default: the pool's) like `run`'s, its connection cut then."""
        within = self._statement_timeout if timeout is None else timeout
        async with self._fresh(within) as connection:
            timed = TimedConnection(connection, within)
            try:
                await timed.execute("BEGIN")
                if within != self._statement_timeout:  # as in `run`, for this transaction
                    await timed.execute(
                        f"SET LOCAL statement_timeout = {server_timeout_ms(within)}"
                    )
                yield timed
                ended = await timed.execute("COMMIT")
            except BaseException as error:
                if isinstance(error, (TimeoutError, asyncio.CancelledError)) or no_answer(error):
                    _cut(connection)  # silent, gone, or its caller gone: not handed back
                else:
                    try:
                        await timed.execute("ROLLBACK")
                    except asyncio.CancelledError:
                        _cut(connection)
                        raise
                    except BaseException:
                        # Cut, the transaction cannot commit: what failed is the caller's
                        # error (a key taken, which callers catch by name), not the ROLLBACK.
                        _cut(connection)
                raise
            if ended == "ROLLBACK":
                raise TransactionRolledBackError(
                    "the transaction was rolled back at COMMIT: a statement in it failed, and "
                    "its block went on as if it had not; nothing it wrote was kept"
                )

    @contextlib.asynccontextmanager
    async def _fresh(self, within: float) -> AsyncIterator[asyncpg.pool.PoolConnectionProxy[Any]]:
        """A pool connection opened since the pool was last expired, handed back within
        `within` seconds (`_hand_back`)."""
        for _ in range(self.pool.get_max_size() + 1):
            connection = await self.pool.acquire()
            # The pool hands out a proxy of our connection class: its methods pass through.
            if cast(_PooledConnection, connection).opened_in(self._generation) < self._generation:
                connection.terminate()  # which hands it back to the pool too
                continue
            try:
                yield connection
            finally:
                await self._hand_back(connection, within)
            return
        raise AssertionError("unreachable: the pool had more connections than its size")

    async def _hand_back(
        self, connection: asyncpg.pool.PoolConnectionProxy[Any], within: float
    ) -> None:
        """Hands `connection` back to the pool, which first resets it with a statement of its
        own (`RESET ALL`, `UNLISTEN *`) on asyncpg's clock: on a network gone silent right
        after the caller's last answer, the caller would wait the pool's whole timeout, then
        hear an error for work that was done. Here the reset keeps the caller's time, its
        connection cut when silent; a reset that fails is no error of the caller's either
        (asyncpg's pool closes that connection itself)."""
        # Ahead of asyncpg's own clock for the reset (the pool's `command_timeout`).
        within = min(within, self._statement_timeout / 2)
        with contextlib.suppress(Exception):  # silent (cut), or the reset failed
            await answered_within(connection, self.pool.release(connection), within)


class TransactionRolledBackError(RuntimeError):
    """A `SharedPool.transaction` block ended normally after one of its statements had failed:
    PostgreSQL then rolls the whole transaction back at COMMIT, and says so only in the
    command's answer ("ROLLBACK"), not as an error. A block must let the error through (or
    undo it with a savepoint); this one would have lost its writes unheard."""


def _cut(connection: Connection | asyncpg.pool.PoolConnectionProxy[Any]) -> None:
    """Closes a connection at once. A pool connection that was cut already, or whose release
    got as far as the pool, has left its proxy, which then refuses every call, `terminate`
    included: nothing is left to cut then."""
    with contextlib.suppress(asyncpg.InterfaceError):
        connection.terminate()


class TimedConnection:
    """A connection whose statements each keep their own time (`answered_within`): one that
    gets no answer within `within` seconds is cut, without asyncpg's cancel request."""

    def __init__(
        self, connection: Connection | asyncpg.pool.PoolConnectionProxy[Any], within: float
    ) -> None:
        self._connection = connection
        self._within = within

    async def run(self, method: str, query: str, *args: Any) -> Any:
        # asyncpg's own clock later than ours (see `answered_within`).
        statement = getattr(self._connection, method)(query, *args, timeout=self._within * 2)
        return await answered_within(self._connection, statement, self._within)

    async def execute(self, query: str, *args: Any) -> str:
        return cast(str, await self.run("execute", query, *args))

    async def fetch(self, query: str, *args: Any) -> list[Any]:
        return cast("list[Any]", await self.run("fetch", query, *args))

    async def fetchrow(self, query: str, *args: Any) -> Any:
        return await self.run("fetchrow", query, *args)

    async def fetchval(self, query: str, *args: Any) -> Any:
        return await self.run("fetchval", query, *args)


async def answered_within(
    connection: Connection | asyncpg.pool.PoolConnectionProxy[Any],
    statement: Awaitable[T],
    timeout: float,
) -> T:
    """`statement`'s result, unless `connection` gives no answer within `timeout` seconds: then
    it is cut (the statement fails at once) and `TimeoutError` raised.

    Not asyncpg's own `timeout=`: when that runs out, asyncpg asks the server to cancel on a new
    connection, which has to cross the same silent network; when it fails, its error sits in a
    future nobody reads ("Future exception was never retrieved" in the application's log). A
    connection that gave no answer is cut and replaced anyway."""
    task = asyncio.ensure_future(statement)
    task.add_done_callback(read_outcome)
    try:
        await asyncio.wait({task}, timeout=timeout)
    finally:
        cut = not task.done()  # no answer in time, or the caller gave up: cut all the same
        if cut:
            # Quietly: an error raised here would replace the caller's CancelledError.
            _cut(connection)
    if cut:
        # Cut, the statement fails at once; a cancellation of the caller meanwhile is not
        # swallowed (a task stopped here would otherwise go on as if it had timed out).
        await asyncio.wait({task})
        raise TimeoutError(f"PostgreSQL gave no answer within {timeout:g} s; connection cut")
    return task.result()


def read_outcome(task: asyncio.Future[Any]) -> None:
    """Marks a statement's error as seen: its caller may have been cancelled meanwhile."""
    if not task.cancelled():
        task.exception()
