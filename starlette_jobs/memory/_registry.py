"""The worker registry of the in-memory store (docs/workers.md): the workers of one process, as
the PostgreSQL store keeps those of every process. `_store.MemoryStore` is built on it."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta

from .._records import JobStatus
from .._worker_records import MISSED_HEARTBEATS, NewWorker, UnrunnableJobs, WorkerRecord
from ._tables import MemoryTables, utc_now


class MemoryRegistry(MemoryTables):
    """`MemoryTables` with the protocol's worker registry."""

    async def register_worker(self, worker: NewWorker) -> None:
        now = utc_now()
        fields = {field.name: getattr(worker, field.name) for field in dataclasses.fields(worker)}
        self.data.worker_schedules[worker.id] = dict(fields.pop("schedules"))
        known = self.data.workers.get(worker.id)
        started = now if known is None else known.started_at  # registered again: as it was
        self.data.workers[worker.id] = WorkerRecord(**fields, started_at=started, last_seen=now)

    async def worker_schedules(self) -> dict[str, dict[str, str]]:
        # Those of registered workers only: a row deleted leaves its entry behind.
        known = self.data.worker_schedules
        return {worker: dict(known.get(worker, {})) for worker in sorted(self.data.workers)}

    async def worker_seen(self, worker_id: str) -> bool:
        found = self.data.workers.get(worker_id)
        if found is None:
            return False
        self.data.workers[worker_id] = dataclasses.replace(found, last_seen=utc_now())
        return True

    async def unregister_worker(self, worker_id: str) -> None:
        self.data.workers.pop(worker_id, None)

    async def list_workers(self) -> list[WorkerRecord]:
        return [self.data.workers[worker_id] for worker_id in sorted(self._live())]

    def _live(self) -> list[str]:
        """The workers seen within `MISSED_HEARTBEATS` of their intervals, as on PostgreSQL."""
        now = utc_now()
        return [worker_id for worker_id in self.data.workers if self._is_live(worker_id, now)]

    def _is_live(self, worker_id: str | None, now: datetime) -> bool:
        worker = self.data.workers.get(worker_id or "")
        return worker is not None and (now - worker.last_seen).total_seconds() <= (
            worker.heartbeat_seconds * MISSED_HEARTBEATS
        )

    async def unrunnable_jobs(
        self, queues: Sequence[str] | None = None, head: int = 1000
    ) -> list[UnrunnableJobs]:
        if queues is None:
            pending = [r for r in self._rows.values() if r.status is JobStatus.PENDING]
        else:
            pending = [row for queue in queues for row in self._due(queue, head)]
        runnable = {
            (queue, name)
            for worker in map(self.data.workers.__getitem__, self._live())
            for queue in worker.queues
            for name in worker.job_names
        }
        found: dict[tuple[str, str], list[datetime]] = {}
        for row in pending:
            if (row.queue, row.name) not in runnable:
                found.setdefault((row.queue, row.name), []).append(row.run_at)
        return [
            UnrunnableJobs(queue, name, len(due), min(due))
            for (queue, name), due in sorted(found.items())
        ]

    async def hold_liveness(self, worker_id: str) -> NothingHeld:
        return NothingHeld()

    async def lockless_workers(self, excluding: str | None = None) -> dict[str, datetime]:
        return {}

    async def rescue_dead_workers(
        self,
        limit: int,
        excluding: str | None = None,
        among: Mapping[str, datetime] | None = None,
    ) -> list[tuple[int, str, JobStatus]]:
        return []

    async def prune_workers(self, missed_heartbeats: float) -> list[str]:
        now = utc_now()
        dead = [
            worker.id
            for worker in self.data.workers.values()
            if worker.last_seen
            < now - timedelta(seconds=worker.heartbeat_seconds * missed_heartbeats)
        ]
        for worker_id in dead:
            del self.data.workers[worker_id]
        return dead


class NothingHeld:
    """The liveness lock of a worker on the in-memory store: the store lives and dies with the
    worker's process, so there is nothing to hold and it is never lost."""

    async def alive(self, timeout: float) -> bool:
        return True

    async def close(self) -> None:
        pass

    def terminate(self) -> None:
        pass
