"""The worker registry of the PostgreSQL store (docs/workers.md): the `starlette_jobs_workers`
rows each worker writes of itself, refreshes and deletes, and the liveness lock each worker holds
on a connection of its own, whose release tells the others it died. `_store.PostgresStore` is
built on it."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from .._errors import DatabaseUnavailableError
from .._records import JobStatus
from .._worker_records import MISSED_HEARTBEATS, NewWorker, UnrunnableJobs, WorkerRecord
from ._connected import ConnectedStore
from ._connections import Connection, answered_within, connect, read_outcome
from ._driver_errors import LOCK_NOT_AVAILABLE, raise_as_store_error
from ._listener import Listener

LIVENESS_TAKEOVER_WAIT = 2.0
"""How long (seconds) a worker's new liveness session waits for the lock its stale session
gives up (the end of that session is awaited for up to a second); at most half the worker's
statement timeout, so that the wait ends by its own bound, before the statement's."""


class WorkerRegistry(ConnectedStore):
    """`ConnectedStore` with the protocol's worker registry. Its statements go through the pool,
    never the lease lane: a registry write never holds up a lease renewal."""

    async def register_worker(self, worker: NewWorker) -> None:
        await self._worker_write(
            "execute",
            self._q["register_worker"],
            worker.id, worker.host, worker.pid, list(worker.queues), list(worker.job_names),
            worker.version, worker.heartbeat_seconds, json.dumps(dict(worker.schedules)),
        )  # fmt: skip

    async def worker_schedules(self) -> dict[str, dict[str, str]]:
        rows = await self._read("fetch", self._q["worker_schedules"])
        return {row[0]: json.loads(row[1]) for row in rows}

    async def worker_seen(self, worker_id: str) -> bool:
        found = await self._worker_write("fetchval", self._q["worker_seen"], worker_id)
        return found is not None

    async def unregister_worker(self, worker_id: str) -> None:
        await self._worker_write("execute", self._q["unregister_worker"], worker_id)

    async def list_workers(self) -> list[WorkerRecord]:
        rows = await self._read("fetch", self._q["list_workers"], MISSED_HEARTBEATS)
        return [_record(tuple(row)) for row in rows]

    async def unrunnable_jobs(
        self, queues: Sequence[str] | None = None, head: int = 1000
    ) -> list[UnrunnableJobs]:
        listed = None if queues is None else list(queues)
        rows = await self._read(
            "fetch", self._q["unrunnable_jobs"], listed, head, MISSED_HEARTBEATS
        )
        return [UnrunnableJobs(*row) for row in rows]

    async def hold_liveness(self, worker_id: str) -> Listener:
        # Keepalives of a few seconds: a host that vanished (no FIN) frees the lock within
        # about 11 s rather than the system's default of two hours. Its statements keep their
        # own time (`answered_within`): no cancel request crosses a network gone silent.
        within = self.worker_statement_timeout
        connection = await connect(
            self.dsn, within, "liveness",
            {"tcp_keepalives_idle": "5", "tcp_keepalives_interval": "2",
             "tcp_keepalives_count": "3"},
            client_timeout=False,
        )  # fmt: skip
        try:
            statement = connection.fetchval(self._q["hold_liveness"], worker_id)
            held = await answered_within(connection, statement, within)
            own = self._liveness_backends.setdefault(worker_id, set())
            if not held and own:
                # Most likely this worker's own earlier connection, which the network dropped
                # without the server noticing: it still holds the lock, and would free it
                # (for the others to rescue this worker's jobs) whenever the server notices.
                held = await self._take_over_liveness(connection, worker_id, own)
        except BaseException as error:
            connection.terminate()
            raise_as_store_error(error, schema=self.schema)
        if not held:
            connection.terminate()
            raise DatabaseUnavailableError(
                f"worker {worker_id}: its liveness lock is held by another session (a hash "
                "collision, or a connection of its own the server has not ended yet); it "
                "claims nothing until it holds the lock"
            )
        # Added, not in place of the others: a session of an attempt cut short a moment ago
        # may still wait for the lock, and get it if this one loses it (a takeover forgets
        # those gone).
        own.add(connection.get_server_pid())
        return HeldLock(connection, within)

    async def _take_over_liveness(
        self, connection: Connection, worker_id: str, own: set[int]
    ) -> bool:
        """Ends the one of the worker's `own` earlier liveness sessions that holds the lock,
        once `connection` waits for it, so that the server hands the lock straight over. False:
        still not held after its wait (`LIVENESS_TAKEOVER_WAIT`), or held by a session not the
        worker's (a hash collision). `own` keeps `connection`'s backend unless it is known not
        to hold the lock: a wait cut short here may still be granted, to a session the worker
        no longer reaches (behind a proxy that still answers, for good), which the next attempt
        ends."""
        within = self.worker_statement_timeout
        pid = connection.get_server_pid()
        earlier = [str(backend) for backend in sorted(own)]
        own.add(pid)
        # Ended by its lock_timeout (LOCK_NOT_AVAILABLE: "held by another session"), never by
        # the server's statement timeout (0.8 of `within`) or the client's.
        wait = min(LIVENESS_TAKEOVER_WAIT, within / 2)
        statement = connection.fetchval(
            self._q["wait_for_liveness"], worker_id, f"{max(1, int(wait * 1000))}ms"
        )
        waiting = asyncio.ensure_future(answered_within(connection, statement, within))
        try:
            while not waiting.done():
                held, ended, alive = await self._worker_write(
                    "fetchrow", self._q["end_stale_liveness"], worker_id, earlier, pid
                )
                own.intersection_update([*map(int, alive), pid])  # one gone holds nothing
                if held is None:  # not waiting yet: in a moment
                    await asyncio.wait({waiting}, timeout=0.005)
                elif held or ended is not None:
                    break  # held, or handed over as the earlier session exits
                else:
                    return False  # another session holds it
            await waiting
        except LOCK_NOT_AVAILABLE:
            return False
        finally:
            if not waiting.done():  # this failed meanwhile: the wait ends with the connection
                connection.terminate()
                await asyncio.wait({waiting})
            if not waiting.cancelled():
                waiting.exception()  # read: raised above if it mattered
        return True

    async def lockless_workers(self, excluding: str | None = None) -> dict[str, datetime]:
        rows = await self._worker_write("fetch", self._q["lockless_workers"], excluding)
        return {row["id"]: row["last_seen"] for row in rows}

    async def rescue_dead_workers(
        self,
        limit: int,
        excluding: str | None = None,
        among: Mapping[str, datetime] | None = None,
    ) -> list[tuple[int, str, JobStatus]]:
        ids = seen = None
        if among is not None:
            ids, seen = list(among), list(among.values())
        rows = await self._worker_write(
            "fetch", self._q["rescue_dead_workers"], limit, self.record_events, excluding,
            ids, seen,
        )  # fmt: skip
        return [(row["id"], row["queue"], JobStatus(row["status"])) for row in rows]

    async def prune_workers(self, missed_heartbeats: float) -> list[str]:
        rows = await self._worker_write("fetch", self._q["prune_workers"], missed_heartbeats)
        return [row["id"] for row in rows]


class HeldLock(Listener):
    """The connection that holds a worker's liveness lock. A look at it that gets no answer
    leaves it open, where another connection is cut: closed, its close would wait in the
    network and reach the server as soon as the network came back, before the worker's new
    session could wait for the lock; the server would free the lock then, and a peer's rescue
    would take the live worker's jobs for a dead one's. The worker closes it (`terminate`)
    once its new session holds the lock (the takeover ends this one's session first)."""

    def __init__(self, connection: Connection, statement_timeout: float) -> None:
        super().__init__(connection, statement_timeout)
        self._unanswered: asyncio.Future[Any] | None = None

    async def alive(self, timeout: float) -> bool:
        connection = self._connection
        if connection.is_closed() or self._unanswered is not None:
            return False
        look = asyncio.ensure_future(connection.execute("SELECT 1"))
        look.add_done_callback(read_outcome)
        done, _ = await asyncio.wait({look}, timeout=timeout)
        if not done:
            self._unanswered = look  # left to wait: the connection stays as it is
            return False
        return look.exception() is None


def _record(row: tuple[Any, ...]) -> WorkerRecord:
    worker_id, host, pid, queues, job_names, *rest = row
    return WorkerRecord(worker_id, host, pid, tuple(queues), tuple(job_names), *rest)
