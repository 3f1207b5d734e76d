"""The worker registry of the PostgreSQL store (docs/workers.md): the `starlette_jobs_workers`
rows each worker writes of itself, refreshes and deletes, and the liveness lock each worker holds
on a connection of its own, whose release tells the others it died. `_store.PostgresStore` is
built on it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .._errors import DatabaseUnavailableError
from .._records import JobStatus
from .._worker_records import NewWorker, UnrunnableJobs, WorkerRecord
from ._connected import ConnectedStore
from ._connections import Listener, connect
from ._driver_errors import raise_as_store_error


class WorkerRegistry(ConnectedStore):
    """`ConnectedStore` with the protocol's worker registry. Its statements go through the pool,
    never the lease lane: a registry write never holds up a lease renewal."""

    async def register_worker(self, worker: NewWorker) -> None:
        await self._worker_write(
            "execute",
            self._q["register_worker"],
            worker.id, worker.host, worker.pid, list(worker.queues), list(worker.job_names),
            worker.version, worker.heartbeat_seconds,
        )  # fmt: skip

    async def worker_seen(self, worker_id: str) -> bool:
        found = await self._worker_write("fetchval", self._q["worker_seen"], worker_id)
        return found is not None

    async def unregister_worker(self, worker_id: str) -> None:
        await self._worker_write("execute", self._q["unregister_worker"], worker_id)

    async def list_workers(self) -> list[WorkerRecord]:
        rows = await self._read("fetch", self._q["list_workers"])
        return [_record(tuple(row)) for row in rows]

    async def unrunnable_jobs(
        self, queues: Sequence[str] | None = None, head: int = 1000
    ) -> list[UnrunnableJobs]:
        listed = None if queues is None else list(queues)
        rows = await self._read("fetch", self._q["unrunnable_jobs"], listed, head)
        return [UnrunnableJobs(*row) for row in rows]

    async def hold_liveness(self, worker_id: str) -> Listener:
        # Keepalives of a few seconds: a host that vanished (no FIN) frees the lock within
        # about 11 s rather than the system's default of two hours.
        connection = await connect(
            self.dsn, self.worker_statement_timeout, "liveness",
            {"tcp_keepalives_idle": "5", "tcp_keepalives_interval": "2",
             "tcp_keepalives_count": "3"},
        )  # fmt: skip
        try:
            held = await connection.fetchval(self._q["hold_liveness"], worker_id)
            earlier = self._liveness_backends.get(worker_id)
            if not held and earlier is not None:
                # Most likely this worker's own earlier connection, which the network dropped
                # without the server noticing: it still holds the lock, and would free it
                # (for the others to rescue this worker's jobs) whenever the server notices.
                await connection.fetchval(self._q["end_stale_liveness"], worker_id, earlier)
                held = await connection.fetchval(self._q["hold_liveness"], worker_id)
        except BaseException as error:
            connection.terminate()
            raise_as_store_error(error)
        if not held:
            connection.terminate()
            raise DatabaseUnavailableError(
                f"worker {worker_id}: its liveness lock is held by another session (a hash "
                "collision, or a connection of its own the server has not ended yet); it "
                "claims nothing until it holds the lock"
            )
        self._liveness_backends[worker_id] = connection.get_server_pid()
        return Listener(connection, self.worker_statement_timeout)

    async def rescue_dead_workers(
        self, limit: int, excluding: str | None = None
    ) -> list[tuple[int, str, JobStatus]]:
        rows = await self._worker_write(
            "fetch", self._q["rescue_dead_workers"], limit, self.record_events, excluding
        )
        return [(row["id"], row["queue"], JobStatus(row["status"])) for row in rows]

    async def prune_workers(self, missed_heartbeats: float) -> list[str]:
        rows = await self._worker_write("fetch", self._q["prune_workers"], missed_heartbeats)
        return [row["id"] for row in rows]


def _record(row: tuple[Any, ...]) -> WorkerRecord:
    worker_id, host, pid, queues, job_names, *rest = row
    return WorkerRecord(worker_id, host, pid, tuple(queues), tuple(job_names), *rest)
