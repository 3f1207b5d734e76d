"""Deploy-aware claiming (docs/workers.md, "Rolling deploys"): which job names a worker claims.

A worker claims only the jobs its code declares. During a rolling deploy a job that only the new
code declares then waits for a new worker instead of failing on an old one. But a job that no
worker will ever know (its code was removed, or its module is not imported) would wait for ever,
so each worker also looks for strays: pending jobs of its queues that no live worker in the
registry can run. Once it has seen a queue's jobs of one name go unrunnable for
`unknown_job_grace` seconds, it claims them too, and its attempt fails them with the usual
"no job named ... is registered" error, attempt recorded, as any job of an unknown name fails.

The grace is counted by the worker that looks, from when it first saw no worker able to run
them: a worker that just started waits a whole grace before failing anything, so a fleet that
restarts in any order never fails the jobs of a worker that has not registered yet.
`unknown_job_grace=0` turns this off: every job is claimed, and one of an unknown name fails at
once, as before deploy-aware claiming.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence

from .._failures import FailureLog
from ..store._protocol import Store

logger = logging.getLogger("starlette_jobs.worker")

# How many due jobs of each queue a look reads, in claim order. Jobs that no worker claims
# gather at the head of their queue, so a bounded look finds them however long the queue is.
_HEAD = 1000


def strays_interval(lease_duration: float, grace: float) -> float:
    """How often a worker looks for strays: as often as upkeep, or often enough that a short
    grace is not overshot by much."""
    return max(min(lease_duration / 3, grace / 2), 0.05)


class Strays:
    """The names each queue's claims ask for: those this process declares, and the strays of
    the queue once unrunnable for the grace. `names(queue)` is None when every name is claimed
    (a grace of 0)."""

    def __init__(
        self,
        store: Store,
        queues: Sequence[str],
        declared: Callable[[], tuple[str, ...]],
        grace: float,
        interval: float,
        wake: Callable[[str], None],
        paused: Callable[[str], bool],
    ) -> None:
        self._store = store
        self._queues = list(queues)
        # The names this process declares, read before every claim: a job declared after the
        # worker started (a module imported late) is claimed too.
        self._declared = declared
        self._declared_now = declared()
        self._known = list(self._declared_now)
        self._grace = grace
        self._interval = interval
        self._wake = wake
        self._paused = paused
        # The names each queue's claims ask for, rebuilt only when they change.
        self._names = {queue: self._known for queue in self._queues}
        self._strays: dict[str, list[str]] = {queue: [] for queue in self._queues}
        # When this worker first saw each (queue, name) unrunnable (the event loop's clock).
        self._unrunnable_since: dict[tuple[str, str], float] = {}
        self._task: asyncio.Task[None] | None = None

    def names(self, queue: str) -> list[str] | None:
        if self._grace == 0:
            return None
        self._follow_declarations()
        return self._names[queue]

    @property
    def known(self) -> list[str] | None:
        """The names this process declares; None with a grace of 0 (every name is claimed)."""
        if self._grace == 0:
            return None
        self._follow_declarations()
        return self._known

    def _follow_declarations(self) -> None:
        declared = self._declared()
        if declared is self._declared_now:
            return
        self._declared_now, self._known = declared, list(declared)
        for queue in self._queues:
            self._set_names(queue)

    async def declared_elsewhere(self, queue: str, name: str) -> bool:
        """`name`'s job of `queue` was claimed as a stray, to fail it: whether a live worker
        that works `queue` declares `name` now, registered since the last look (during a
        rolling deploy, the first new worker). If so, `name` is a stray no more: its jobs are
        that worker's to run, and fail on none."""
        if self._grace == 0:
            return False  # every name is claimed, and one not declared here fails at once
        workers = await self._store.list_workers()
        if not any(queue in w.queues and name in w.job_names for w in workers):
            return False
        self._unrunnable_since.pop((queue, name), None)
        if name in self._strays[queue]:
            self._strays[queue] = [stray for stray in self._strays[queue] if stray != name]
            self._set_names(queue)
        return True

    def _set_names(self, queue: str) -> None:
        strays = self._strays[queue]
        self._names[queue] = sorted({*self._known, *strays}) if strays else self._known

    def start(self) -> None:
        if self._grace > 0:
            self._task = asyncio.create_task(self._run(), name="starlette_jobs strays")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def _run(self) -> None:
        failures = FailureLog(logger, "looking for unrunnable jobs")
        while True:
            await asyncio.sleep(self._interval)
            try:
                await self.look()
            except Exception as error:
                failures.failed(error)
            else:
                failures.succeeded()

    async def look(self) -> None:
        """Finds the unrunnable jobs of this worker's queues (a paused queue's are left), and
        adds to each queue's claims the names unrunnable for the grace."""
        queues = [queue for queue in self._queues if not self._paused(queue)]
        found = await self._store.unrunnable_jobs(queues, _HEAD) if queues else []
        now = asyncio.get_running_loop().time()
        self._follow_declarations()
        # This worker runs what it declares, on its queues, even while its own row is missing
        # from the registry (it lost its liveness lock, and writes the row once it holds it).
        found = [jobs for jobs in found if jobs.name not in self._known]
        seen = {(jobs.queue, jobs.name) for jobs in found}
        for gone in self._unrunnable_since.keys() - seen:
            del self._unrunnable_since[gone]
        strays: dict[str, list[str]] = {queue: [] for queue in self._queues}
        for jobs in found:
            since = self._unrunnable_since.setdefault((jobs.queue, jobs.name), now)
            if now - since >= self._grace:
                strays[jobs.queue].append(jobs.name)
            elif since == now:
                logger.warning(
                    "queue %r: %d pending job(s) named %r that no live worker declares; they "
                    "wait for one, and fail in %.0f s if none starts",
                    jobs.queue, jobs.pending, jobs.name, self._grace,
                )  # fmt: skip
        for queue, names in strays.items():
            if names == self._strays[queue]:
                continue
            if names:
                logger.warning(
                    "queue %r: no live worker declared %s for %.0f s: their jobs fail",
                    queue, ", ".join(map(repr, names)), self._grace,
                )  # fmt: skip
            self._strays[queue] = names
            self._set_names(queue)
            self._wake(queue)
