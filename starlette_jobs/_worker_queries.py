"""`WorkerListing`: the part of `Jobs` that lists the worker registry (`jobs.workers()`),
over whatever `Store` the `Jobs` it belongs to has started."""

from __future__ import annotations

import builtins

from ._errors import unavailable_as_error
from ._worker_records import WorkerRecord
from .store._protocol import Store


class WorkerListing:
    """The part of `Jobs` that lists the workers; `Jobs` supplies `_ready_store`."""

    @property
    def _ready_store(self) -> Store:
        raise NotImplementedError

    async def workers(self) -> builtins.list[WorkerRecord]:
        """The live workers of every process on this database, by id. A worker that stopped
        cleanly is gone at once; one that died (killed, its host gone) within seconds, once a
        live worker sees its liveness lock free (on PostgreSQL), else once it has missed three
        heartbeats.

        Example:
            >>> for worker in await jobs.workers():
            ...     print(worker.id, worker.queues)
        """
        with unavailable_as_error("list workers"):
            return await self._ready_store.list_workers()
