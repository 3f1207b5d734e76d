"""The worker's row in the registry (docs/workers.md): written as it starts, refreshed every
`lease_duration / 3` in a task of its own (beside the heartbeat of `_leases.py`, so a slow
registry write never delays a lease renewal), still refreshed while the worker drains at
shutdown, and deleted when it stops cleanly. A dead worker's row is deleted by the others: with
its jobs once its liveness lock is free (`_liveness.py`), else by upkeep (`_upkeep.Upkeep`) once
unseen for `MISSED_HEARTBEATS` of its intervals."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import socket
from collections.abc import Callable, Sequence

from .._failures import FailureLog
from .._job import registered_names
from .._schedules import registered_schedules
from .._version import __version__
from .._worker_records import MISSED_HEARTBEATS, NewWorker
from ..store._connectivity import Backoff
from ..store._protocol import Store

logger = logging.getLogger("starlette_jobs.worker")


def new_worker(worker_id: str, queues: Sequence[str], heartbeat_seconds: float) -> NewWorker:
    """This process's row: the job names and schedules are those its code declares (`@job`,
    `@periodic`)."""
    return NewWorker(
        id=worker_id,
        host=socket.gethostname(),
        pid=os.getpid(),
        queues=tuple(queues),
        job_names=registered_names(),
        version=__version__,
        heartbeat_seconds=heartbeat_seconds,
        schedules=declared_schedules(),
    )


def declared_schedules() -> tuple[tuple[str, str], ...]:
    """The schedules the process's code declares (`@periodic`), as the registry lists them:
    (name, hash of the definition), by name."""
    return tuple(sorted((s.name, s.declared().definition_hash) for s in registered_schedules()))


class Registration:
    """Keeps `worker`'s row in the registry from `start` to `stop`, while `holds_lock()`: a row
    written while the worker's liveness lock is free would make it look dead to the others."""

    def __init__(
        self,
        store: Store,
        worker: NewWorker,
        timeout: float,
        holds_lock: Callable[[], bool],
    ) -> None:
        self._store = store
        self._worker = worker
        self._timeout = timeout  # the most a clean stop waits to delete the row
        self._holds_lock = holds_lock
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        await self._store.register_worker(self._worker)
        self._task = asyncio.create_task(self._run(), name="starlette_jobs registry")

    async def stop(self, timeout: float | None = None) -> None:
        """Stops the heartbeat and deletes the row, waiting at most `timeout` seconds (default:
        the one given at construction); a row left behind (the database did not answer) is
        deleted by upkeep once it is unseen for long enough."""
        if self._task is None:
            return
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)
        self._task = None
        try:
            await asyncio.wait_for(
                self._store.unregister_worker(self._worker.id),
                self._timeout if timeout is None else timeout,
            )
        except Exception as error:
            logger.warning(
                "worker %s: could not delete its row from the registry (%s): upkeep deletes it "
                "once it is unseen for %g s",
                self._worker.id, error or type(error).__name__,
                self._worker.heartbeat_seconds * MISSED_HEARTBEATS,
            )  # fmt: skip

    async def _run(self) -> None:
        interval = self._worker.heartbeat_seconds
        backoff = Backoff(cap=interval)
        failures = FailureLog(logger, "refreshing the worker registry")
        while True:
            await asyncio.sleep(interval)
            while True:
                try:
                    await self.refresh()
                except Exception as error:
                    failures.failed(error)
                else:
                    backoff.reset()
                    failures.succeeded()
                    break
                await backoff.wait()

    async def refresh(self) -> None:
        """The heartbeat; a row pruned meanwhile (the worker could not reach the database for a
        while, and looked dead) is written again, and so is one whose job names or schedules
        changed (a job declared after the worker started, which it claims too; a schedule,
        which it ticks). Not while the liveness lock is lost: `register_again` writes it once
        the lock is held again."""
        if not self._holds_lock():
            return
        if self._declared_since():
            await self.register_again()
            return
        if not await self._store.worker_seen(self._worker.id):
            logger.warning(
                "worker %s: its registry row was gone; registering again", self._worker.id
            )
            await self._store.register_worker(self._worker)

    async def register_again(self) -> None:
        """Writes the row, with the job names and schedules the code declares now."""
        if self._declared_since():
            self._worker = dataclasses.replace(
                self._worker, job_names=registered_names(), schedules=declared_schedules()
            )
        await self._store.register_worker(self._worker)

    def _declared_since(self) -> bool:
        """Whether the code declared jobs or schedules since the row was written."""
        worker = self._worker
        return worker.job_names != registered_names() or (worker.schedules != declared_schedules())
