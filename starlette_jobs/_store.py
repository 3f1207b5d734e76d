"""The only module that talks SQL: runs the named queries of sql/queries.sql and the migrations."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from functools import cache
from importlib import resources
from typing import Any, NamedTuple, TypeAlias
from uuid import UUID

import asyncpg

from ._connectivity import connection_lost
from ._errors import UniqueKeyTakenError
from ._record import JobRecord, JobStatus

# pg_advisory_xact_lock key that serializes migrations: the first 8 bytes of "starlette-jobs".
_MIGRATION_LOCK_KEY = int.from_bytes(b"stjobs\x00\x01", "big", signed=True)
_HEADER = re.compile(r"^-- name: (\w+)\s*$", re.MULTILINE)
_MIGRATION_FILE = re.compile(r"(\d{4})_\w+\.sql")
_UNIQUE_KEY_TRIES = 5
# Seconds to wait for a new connection: an unreachable server (a dropped route, a firewall that
# swallows packets) fails a call in this time instead of asyncpg's default minute.
CONNECT_TIMEOUT = 10.0


def channel_for(queue: str) -> str:
    """The LISTEN/NOTIFY channel of a queue (the same text the SQL builds with `||`)."""
    return f"starlette_jobs:{queue}"


@cache
def queries() -> dict[str, str]:
    """The named queries of sql/queries.sql, read once."""
    text = resources.files(__package__).joinpath("sql", "queries.sql").read_text("utf-8")
    parts = _HEADER.split(text)
    # parts = [preamble, name1, body1, name2, body2, ...]
    return {name: body.strip() for name, body in zip(parts[1::2], parts[2::2], strict=True)}


def migrations() -> list[tuple[int, str, str]]:
    """(version, file name, SQL) of every shipped migration, in order."""
    folder = resources.files(__package__).joinpath("sql", "migrations")
    found = []
    for entry in folder.iterdir():
        match = _MIGRATION_FILE.fullmatch(entry.name)
        if match:
            found.append((int(match.group(1)), entry.name, entry.read_text("utf-8")))
    return sorted(found)


class Claim(NamedTuple):
    """A job this worker has just leased."""

    id: int
    name: str
    queue: str
    payload: str
    attempts: int
    max_attempts: int
    lease_token: UUID
    trace_context: str | None


class Outcome(NamedTuple):
    """How one attempt ended, to be written by `Store.record_outcomes`."""

    id: int
    lease_token: UUID
    status: JobStatus  # SUCCEEDED, FAILED, or PENDING for a retry
    retry_delay: float | None
    error: str | None
    result: str | None  # JSON text


class NewJobs(NamedTuple):
    """Rows to insert for one job name; see `Store.insert_jobs`."""

    name: str
    queue: str
    payloads: list[str]
    priority: int
    delay: float | None
    run_at: datetime | None
    max_attempts: int
    trace_context: str | None
    unique_key: str | None
    notify: bool


Executor: TypeAlias = "asyncpg.Connection[Any] | asyncpg.Pool[Any] | _Lane"


class _Lane:
    """A connection of its own for one hot path, used by one caller at a time; a caller that
    finds it busy goes to the pool instead, through `pooled`. Opened on first use (a process
    that never enqueues never opens the producer's), and again after the server dropped it.
    Statements run on it one at a time, outside any transaction, so it keeps no state between
    them."""

    def __init__(
        self,
        dsn: str,
        command_timeout: float,
        pooled: Callable[..., Awaitable[Any]],
        on_connection_lost: Callable[[], Awaitable[None]],
        server_settings: dict[str, str] | None = None,
    ) -> None:
        self._dsn = dsn
        self._command_timeout = command_timeout
        self._pooled = pooled
        self._on_connection_lost = on_connection_lost
        self._server_settings = server_settings
        self._connection: asyncpg.Connection[Any] | None = None
        self._expired = False
        self._lock = asyncio.Lock()

    async def fetch(self, query: str, *args: Any) -> list[asyncpg.Record]:
        rows: list[asyncpg.Record] = await self._run("fetch", query, args)
        return rows

    async def fetchval(self, query: str, *args: Any) -> Any:
        return await self._run("fetchval", query, args)

    async def _run(self, method: str, query: str, args: tuple[Any, ...]) -> Any:
        """`connection.<method>(query, *args)` on this lane's connection, or the pool's."""
        if self._lock.locked():
            return await self._pooled(method, query, *args)
        async with self._lock:
            connection = await self._connected()
            try:
                return await getattr(connection, method)(query, *args)
            except BaseException as error:
                lost = connection_lost(error)  # "terminating connection due to ..." is too
                if lost or not isinstance(error, asyncpg.PostgresError):
                    # Unless the server merely refused the statement, the connection is gone
                    # or may be mid-way through it: like the pool when a reset fails, start
                    # afresh next time.
                    self._discard(connection)
                if lost:
                    await self._on_connection_lost()
                raise

    def _discard(self, connection: asyncpg.Connection[Any]) -> None:
        if self._connection is connection:
            self._connection = None
        connection.terminate()

    def expire(self) -> None:
        """Open a new connection on next use: another one found the server gone."""
        self._expired = True

    async def _connected(self) -> asyncpg.Connection[Any]:
        if self._expired and self._connection is not None:
            self._discard(self._connection)
        self._expired = False
        if self._connection is None or self._connection.is_closed():
            self._connection = await asyncpg.connect(
                self._dsn,
                timeout=CONNECT_TIMEOUT,
                command_timeout=self._command_timeout,
                server_settings=self._server_settings,
            )
        return self._connection

    async def close(self) -> None:
        async with self._lock:
            connection, self._connection = self._connection, None
            if connection is not None and not connection.is_closed():
                await connection.close()

    def terminate(self) -> None:
        if self._connection is not None:
            self._connection.terminate()


class Store:
    """Typed methods over one asyncpg pool, one per named query."""

    def __init__(self, pool: asyncpg.Pool[Any], dsn: str, command_timeout: float = 30.0) -> None:
        self.pool = pool
        self.dsn = dsn
        self._q = queries()
        # The hot paths (enqueue, claim, outcomes) each have a connection of their own: a pool
        # checkout costs a shielded task and timers per statement, and hops between backends.
        self._producer = _Lane(dsn, command_timeout, self._write, self._connections_lost)
        # PostgreSQL keeps planning the claim afresh (a custom plan for each LIMIT), which costs
        # about as much as running it; its generic plan is as good. Only this connection runs
        # claims, so forcing generic plans here changes nothing else.
        self._claimer = _Lane(
            dsn,
            command_timeout,
            self._write,
            self._connections_lost,
            {"plan_cache_mode": "force_generic_plan"},
        )
        self._writer = _Lane(dsn, command_timeout, self._write, self._connections_lost)
        self._lanes = (self._producer, self._claimer, self._writer)

    @classmethod
    async def open(
        cls, dsn: str, *, min_size: int, max_size: int, command_timeout: float = 30.0
    ) -> Store:
        """A pool on `dsn`. No statement of ours takes long; `command_timeout` keeps a hung
        server or a silent network from blocking a worker (and its shutdown) forever.
        With `min_size=0` the pool opens without reaching the server."""
        pool = await asyncpg.create_pool(
            dsn,
            min_size=min_size,
            max_size=max_size,
            command_timeout=command_timeout,
            timeout=CONNECT_TIMEOUT,
        )
        return cls(pool, dsn, command_timeout)

    async def close(self) -> None:
        for lane in self._lanes:
            await lane.close()
        await self.pool.close()

    def terminate(self) -> None:
        """Closes every connection at once, without waiting for statements in flight."""
        for lane in self._lanes:
            lane.terminate()
        self.pool.terminate()

    async def _connections_lost(self) -> None:
        """A connection found itself dropped. When the server restarts (or an operator ends
        the backends) every connection is dropped, but asyncpg notices only once it reads the
        closing, and until then a dropped connection is handed out and fails its statement,
        not always with a connection error. Have all of them replaced on next use."""
        await self.pool.expire_connections()
        for lane in self._lanes:
            lane.expire()

    async def _read(self, method: str, query: str, *args: Any) -> Any:
        """`pool.<method>(query, *args)` for a statement that changes nothing, run once more if
        its connection turned out dropped: a read is safe to repeat."""
        try:
            return await getattr(self.pool, method)(query, *args)
        except BaseException as error:
            if not connection_lost(error):
                raise
        await self._connections_lost()
        return await getattr(self.pool, method)(query, *args)

    async def _write(self, method: str, query: str, *args: Any) -> Any:
        """`pool.<method>(query, *args)` for a statement that changes rows. Not repeated if its
        connection turned out dropped: the server may have run it before dropping it."""
        try:
            return await getattr(self.pool, method)(query, *args)
        except BaseException as error:
            if connection_lost(error):
                await self._connections_lost()
            raise

    async def migrate(self) -> list[str]:
        """Applies the migrations this database lacks, in one transaction; returns their names."""
        applied_now = []
        # A connection of its own, without the pool's statement timeout: a migration may
        # legitimately take long on a large table.
        connection: asyncpg.Connection[Any] = await asyncpg.connect(
            self.dsn, timeout=CONNECT_TIMEOUT
        )
        try:
            async with connection.transaction():
                await connection.execute(self._q["lock_migrations"], _MIGRATION_LOCK_KEY)
                await connection.execute(self._q["create_migrations_table"])
                done = {row[0] for row in await connection.fetch(self._q["applied_migrations"])}
                for version, name, sql in migrations():
                    if version not in done:
                        await connection.execute(sql)
                        await connection.execute(self._q["record_migration"], version, name)
                        applied_now.append(name)
        finally:
            await connection.close()
        return applied_now

    async def insert_jobs(self, new: NewJobs, connection: Executor | None = None) -> list[int]:
        """Inserts the jobs and returns their ids, in order. With `connection`, in its
        transaction; otherwise on the producer connection, or the pool when it is busy."""
        return await self._insert_jobs(new, connection or self._producer)

    async def _insert_jobs(self, new: NewJobs, executor: Executor) -> list[int]:
        if len(new.payloads) == 1 and new.unique_key is None:
            job_id: int = await executor.fetchval(
                self._q["insert_job"],
                new.name, new.queue, new.payloads[0], new.priority, new.delay, new.run_at,
                new.max_attempts, new.trace_context, new.notify,
            )  # fmt: skip
            return [job_id]
        if len(new.payloads) == 1:
            for _ in range(_UNIQUE_KEY_TRIES):
                job_id = await executor.fetchval(
                    self._q["insert_unique_job"],
                    new.name, new.queue, new.payloads[0], new.priority, new.delay, new.run_at,
                    new.max_attempts, new.trace_context, new.unique_key, new.notify,
                )  # fmt: skip
                if job_id is not None:
                    return [job_id]
                # The key's holder committed after this statement's snapshot was taken, so
                # neither the insert nor the look-up saw it: a new statement will.
            raise RuntimeError(
                f"unique key {new.unique_key!r}: could neither insert nor find the live job "
                "holding it (is the connection's transaction REPEATABLE READ or SERIALIZABLE?)"
            )
        ids = await executor.fetchval(
            self._q["insert_jobs"],
            new.name, new.queue, f"[{','.join(new.payloads)}]", new.priority, new.delay, new.run_at,
            new.max_attempts, new.trace_context, new.notify,
        )  # fmt: skip
        return list(ids)

    async def claim_batch(
        self, queue: str, limit: int, worker_id: str, lease_seconds: float
    ) -> list[Claim]:
        rows = await self._claimer.fetch(
            self._q["claim_batch"], queue, limit, worker_id, lease_seconds
        )
        return [Claim(*row) for row in rows]

    async def record_outcomes(self, outcomes: Sequence[Outcome]) -> set[int]:
        """Writes the outcomes whose lease is still held; returns the ids written."""
        columns = list(zip(*outcomes, strict=True))
        rows = await self._writer.fetch(self._q["record_outcomes"], *columns)
        return {row[0] for row in rows}

    async def extend_leases(
        self, held: Sequence[tuple[int, UUID]], lease_seconds: float
    ) -> set[int]:
        ids, tokens = zip(*held, strict=True)
        rows = await self._write("fetch", self._q["extend_leases"], ids, tokens, lease_seconds)
        return {row[0] for row in rows}

    async def release_jobs(self, held: Sequence[tuple[int, UUID]]) -> set[int]:
        ids, tokens = zip(*held, strict=True)
        rows = await self._write("fetch", self._q["release_jobs"], ids, tokens)
        return {row[0] for row in rows}

    async def release_job(self, job_id: int) -> bool:
        return await self._write("fetchrow", self._q["release_job"], job_id) is not None

    async def release_worker_jobs(self, worker_id: str) -> list[int]:
        rows = await self._write("fetch", self._q["release_worker_jobs"], worker_id)
        return [row[0] for row in rows]

    async def prune_finished(self, retention_seconds: float, limit: int) -> int:
        deleted: int = await self._write(
            "fetchval", self._q["prune_finished"], retention_seconds, limit
        )
        return deleted

    async def rescue_expired(self, limit: int) -> list[tuple[int, str, JobStatus]]:
        rows = await self._write("fetch", self._q["rescue_expired"], limit)
        return [(row[0], row[1], JobStatus(row[2])) for row in rows]

    async def get_job(self, job_id: int) -> JobRecord | None:
        row = await self._read("fetchrow", self._q["get_job"], job_id)
        return None if row is None else JobRecord.from_row(row)

    async def list_jobs(
        self, status: JobStatus | None, queue: str | None, limit: int
    ) -> list[JobRecord]:
        rows = await self._read("fetch", self._q["list_jobs"], status, queue, limit)
        return [JobRecord.from_row(row) for row in rows]

    async def count_by_status(self, queue: str | None) -> dict[JobStatus, int]:
        counts = dict.fromkeys(JobStatus, 0)
        for status, jobs in await self._read("fetch", self._q["count_by_status"], queue):
            counts[JobStatus(status)] = jobs
        return counts

    async def count_unfinished(self, queues: Sequence[str], horizon_seconds: float | None) -> int:
        count: int = await self._read(
            "fetchval", self._q["count_unfinished"], list(queues), horizon_seconds
        )
        return count

    async def cancel_job(self, job_id: int) -> bool:
        return await self._write("fetchval", self._q["cancel_job"], job_id) is not None

    async def retry_job(self, job_id: int) -> bool:
        try:
            return await self._write("fetchrow", self._q["retry_job"], job_id) is not None
        except asyncpg.UniqueViolationError:
            raise UniqueKeyTakenError(
                f"job {job_id} cannot be retried: another pending or running job holds its "
                "unique key; retry it once that job has finished"
            ) from None

    async def job_status(self, job_id: int) -> JobStatus | None:
        status = await self._read("fetchval", self._q["job_status"], job_id)
        return None if status is None else JobStatus(status)

    async def listen(
        self, dsn: str, queues: Sequence[str], on_notify: Callable[[str], None]
    ) -> asyncpg.Connection[Any]:
        """A connection of its own that calls `on_notify(queue)` when a queue's channel fires."""
        connection: asyncpg.Connection[Any] = await asyncpg.connect(dsn, timeout=CONNECT_TIMEOUT)
        for queue in queues:
            await connection.add_listener(
                channel_for(queue), lambda *_args, queue=queue: on_notify(queue)
            )
        return connection
