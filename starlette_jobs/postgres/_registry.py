"""The worker registry of the PostgreSQL store (docs/workers.md): the `starlette_jobs_workers`
rows each worker writes of itself, refreshes and deletes. `_store.PostgresStore` is built on it."""

from __future__ import annotations

from typing import Any

from .._worker_records import NewWorker, WorkerRecord
from ._connected import ConnectedStore


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

    async def prune_workers(self, missed_heartbeats: float) -> list[str]:
        rows = await self._worker_write("fetch", self._q["prune_workers"], missed_heartbeats)
        return [row["id"] for row in rows]


def _record(row: tuple[Any, ...]) -> WorkerRecord:
    worker_id, host, pid, queues, job_names, *rest = row
    return WorkerRecord(worker_id, host, pid, tuple(queues), tuple(job_names), *rest)
