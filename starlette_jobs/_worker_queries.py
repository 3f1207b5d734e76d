"""`WorkerListing`: the part of `Jobs` that lists the worker registry (`jobs.workers()`) and the
jobs no live worker can run (`jobs.unrunnable_jobs()`), over whatever `Store` the `Jobs` it
belongs to has started."""

from __future__ import annotations

import builtins

from ._errors import unavailable_as_error
from ._worker_records import UnrunnableJobs, WorkerRecord
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

    async def unrunnable_jobs(self) -> builtins.list[UnrunnableJobs]:
        """The pending jobs that no live worker can run, by queue and name: no worker in the
        registry both works their queue and declares their name. During a rolling deploy these
        are the jobs only the new code declares, until a new worker starts; a name that stays
        here points at code that was removed, or a module the workers do not import. A worker
        of the queue fails them once it has seen them so for `unknown_job_grace` seconds.

        Example:
            >>> for stuck in await jobs.unrunnable_jobs():
            ...     print(stuck.queue, stuck.name, stuck.pending)
        """
        with unavailable_as_error("list the jobs no worker can run"):
            return await self._ready_store.unrunnable_jobs()
