"""What every statement of the PostgreSQL store goes through: its connections (a lane for each hot
path, the shared pool for the rest, LISTEN), opening and closing them, the schema's migrations,
and `_read` / `_write`, which send a named query of sql/queries.sql once more on a connection
found dead and raise the driver's errors as the library's own (see `_driver_errors.unavailable`).
`_store.PostgresStore` builds the `Store` protocol on it."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any, Self, TypeVar
from uuid import UUID

from .._errors import SchemaVersionError
from ..store._connectivity import STATEMENT_TIMEOUT
from ._connections import SharedPool, connect_plain
from ._driver_errors import (
    NOT_MIGRATED,
    connection_lost,
    never_sent,
    no_answer,
    raise_as_store_error,
)
from ._lanes import Lane
from ._listener import (
    CANCEL_CHANNEL,
    CONTROLS_CHANNEL,
    OUTCOMES_CHANNEL,
    Listener,
    channel_for,
)
from ._migrations import apply_migrations, check_schema_version, queries
from ._schema import channel_prefix, search_path_settings

T = TypeVar("T")

# The worker's statements on its own connections (claims, outcomes, lease renewals) find their
# rows through an index, whatever the table's statistics say. A plan made while the table was
# empty (a worker started on a new database) is otherwise kept once the table fills, until
# autovacuum's ANALYZE: each claim then read the whole table (17 ms a claim at 200,000 jobs, a
# drain 12 times slower: tests/postgres/test_connected.py). These connections run nothing else.
_INDEXED_PLANS = {"enable_seqscan": "off"}


class ConnectedStore:
    """The PostgreSQL store's connections and statements, without the protocol's methods."""

    def __init__(
        self,
        shared: SharedPool,
        dsn: str,
        statement_timeout: float = STATEMENT_TIMEOUT,
        worker_statement_timeout: float = STATEMENT_TIMEOUT,
        schema: str | None = None,
    ) -> None:
        self._shared = shared
        self.pool = shared.pool  # for tests and operators' own statements
        self.dsn = dsn
        self.statement_timeout = statement_timeout
        self.worker_statement_timeout = worker_statement_timeout
        self.record_events = True
        # The backends of each worker's liveness sessions that may hold its lock: the one that
        # took it, and any whose takeover was cut short (`_registry.hold_liveness`).
        self._liveness_backends: dict[str, set[int]] = {}
        # `Jobs(schema=...)`: every connection opened here has its `search_path` (see _schema).
        self.schema = schema
        self._settings = search_path_settings(schema)
        self._channels = channel_prefix(schema)
        self._q = queries(schema)

        def lane(purpose: str, timeout: float, extra: dict[str, str] | None = None) -> Lane:
            settings = {**self._settings, **(extra or {})}
            return Lane(
                dsn, purpose, timeout, self._write, self.expire_connections, settings,
                schema=schema,
            )  # fmt: skip

        # The hot paths (enqueue, claim, outcomes) each have a connection of their own: a pool
        # checkout costs a shielded task and timers per statement, and hops between backends.
        self._producer = lane("enqueue", statement_timeout)
        # PostgreSQL keeps planning the claim afresh (a custom plan for each LIMIT), which costs
        # about as much as running it; its generic plan is as good. Only this connection runs
        # claims, so forcing generic plans here changes nothing else.
        self._claimer = lane(
            "claims",
            worker_statement_timeout,
            {"plan_cache_mode": "force_generic_plan", **_INDEXED_PLANS},
        )
        self._writer = lane("outcomes", worker_statement_timeout, _INDEXED_PLANS)
        # Lease renewals wait for nothing else: not for a busy outcome write, nor the pool.
        self._leases = lane("leases", worker_statement_timeout, _INDEXED_PLANS)
        self._lanes = (self._producer, self._claimer, self._writer, self._leases)

    @property
    def name(self) -> str:
        return "PostgreSQL"

    @property
    def database(self) -> object:
        # The schema too: one transaction on a connection of one schema's `search_path` writes
        # that schema's tables only (another's jobs would land in it, under ids of its own).
        return self.dsn, self.schema

    @classmethod
    async def open(
        cls,
        dsn: str,
        *,
        min_size: int,
        max_size: int,
        statement_timeout: float = STATEMENT_TIMEOUT,
        worker_statement_timeout: float = STATEMENT_TIMEOUT,
        schema: str | None = None,
    ) -> Self:
        """A pool on `dsn`. No statement of ours takes long: the timeouts keep a hung server or
        a silent network from blocking a caller (or a worker's shutdown) for long.
        With `min_size=0` the pool opens without reaching the server. `schema`: the one that
        holds the tables (`Jobs(schema=...)`), None for the connections' default."""
        shared = await SharedPool.open(
            dsn,
            min_size=min_size,
            max_size=max_size,
            statement_timeout=statement_timeout,
            settings=search_path_settings(schema),
        )
        return cls(shared, dsn, statement_timeout, worker_statement_timeout, schema)

    async def close(self) -> None:
        for lane in self._lanes:
            await lane.close()
        await self.pool.close()

    def terminate(self) -> None:
        """Closes every connection at once, without waiting for statements in flight."""
        for lane in self._lanes:
            lane.terminate()
        self.pool.terminate()

    async def expire_connections(self) -> None:
        """A connection found itself dropped, or got no answer in time. When the server
        restarts (or an operator ends the backends) every connection is dropped, but asyncpg
        notices only once it reads the closing, and until then a dropped connection is handed
        out and fails its statement; when the network goes silent, every connection waits in
        vain. Have all of them replaced on next use."""
        self._shared.expire()
        for lane in self._lanes:
            lane.expire()

    async def _read(self, method: str, query: str, *args: Any) -> Any:
        """`SharedPool.run` for a statement that changes nothing, run once more if its connection
        turned out dropped: a read is safe to repeat."""
        try:
            return await self._shared.run(method, query, *args)
        except Exception as error:
            if not no_answer(error):
                raise_as_store_error(error, schema=self.schema)
            await self.expire_connections()
            if not connection_lost(error):
                # No answer in time: once more would double the wait.
                raise_as_store_error(error, schema=self.schema)
        try:
            return await self._shared.run(method, query, *args)
        except Exception as error:
            raise_as_store_error(error, schema=self.schema)

    async def _write(
        self, method: str, query: str, *args: Any, timeout: float | None = None
    ) -> Any:
        """`SharedPool.run` for a statement that changes rows. Not repeated if its connection
        turned out dropped, unless it never reached the server: the server may have run it."""
        try:
            return await self._shared.run(method, query, *args, timeout=timeout)
        except Exception as error:
            if not no_answer(error):
                raise_as_store_error(error, schema=self.schema)
            await self.expire_connections()
            if not never_sent(error):
                raise_as_store_error(error, schema=self.schema)
        try:
            return await self._shared.run(method, query, *args, timeout=timeout)
        except Exception as error:
            raise_as_store_error(error, schema=self.schema)

    async def _worker_write(self, method: str, query: str, *args: Any) -> Any:
        """`_write` for a worker's own statement, given up after a worker statement timeout
        (not the pool's longer one), so that shutdown keeps its bound."""
        return await self._write(method, query, *args, timeout=self.worker_statement_timeout)

    async def migrate(self) -> list[str]:
        """Applies the migrations this database lacks, in one transaction; returns their names."""
        # A connection of its own, without the pool's statement timeout: a migration may
        # legitimately take long on a large table.
        try:
            connection = await connect_plain(self.dsn, self._settings)
        except Exception as error:
            raise_as_store_error(error, connecting=True)
        try:
            applied = await apply_migrations(connection, schema=self.schema)
            await connection.close()
        except NOT_MIGRATED:
            # A migration's own statement naming what the server lacks (a function of a newer
            # release of PostgreSQL, say): not a schema to migrate, which it is doing.
            connection.terminate()
            raise
        except BaseException as error:
            connection.terminate()
            raise_as_store_error(error, schema=self.schema)
        return applied

    async def check_schema(self, *, complete: bool) -> None:
        """Raises `SchemaVersionError` if the database's schema is newer than this code, or,
        with `complete`, if it lacks a migration (for a start with `migrate=False`)."""
        try:
            rows = await self._read("fetch", self._q["applied_migrations"])
        except SchemaVersionError:  # not even the migrations' table
            rows = []
        check_schema_version(
            {row[0] for row in rows}, missing_is_error=complete, schema=self.schema
        )

    async def listen(
        self,
        queues: Sequence[str],
        on_notify: Callable[[str], None],
        on_cancel: Callable[[UUID], None] | None = None,
        on_controls: Callable[[str], None] | None = None,
    ) -> Listener:
        """A connection of its own that calls `on_notify(queue)` when a queue's channel fires,
        `on_cancel(lease_token)` when a running job is asked to stop, and `on_controls(queue)`
        when a queue's controls changed."""
        prefix = self._channels
        channels: dict[str, Callable[[str], None]] = {
            channel_for(queue, prefix): functools.partial(_wake, on_notify, queue)
            for queue in queues
        }
        if on_cancel is not None:
            channels[prefix + CANCEL_CHANNEL] = functools.partial(_call_with, on_cancel, UUID)
        if on_controls is not None:
            channels[prefix + CONTROLS_CHANNEL] = on_controls
        return await Listener.open(
            self.dsn, self.worker_statement_timeout, channels, self._settings
        )

    async def listen_for_outcomes(self, on_finished: Callable[[int], None]) -> Listener:
        channel = self._channels + OUTCOMES_CHANNEL
        channels = {channel: functools.partial(_call_with, on_finished, int)}
        return await Listener.open(
            self.dsn, self.worker_statement_timeout, channels, self._settings
        )


def _wake(on_notify: Callable[[str], None], queue: str, _payload: str) -> None:
    on_notify(queue)


def _call_with(callback: Callable[[T], None], parse: Callable[[str], T], payload: str) -> None:
    """`callback(parse(payload))`; a payload that does not parse (a NOTIFY sent by hand on our
    channel) is ignored."""
    try:
        value = parse(payload)
    except ValueError:
        return
    callback(value)
