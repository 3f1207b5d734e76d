"""Work any worker does for the whole cluster, and the LISTEN connection that wakes this one.

- `Upkeep`: rescues jobs whose lease expired (their worker died or froze) and deletes the
  registry rows of dead workers, every `lease_duration / 3`; it starts and stops the worker's
  `Retention` (`_retention.py`), which deletes jobs finished longer than the retention ago in a
  task of its own, so that a backlog to delete never delays a rescue.
- `Wakeups`: keeps the LISTEN connection and opens it again when it stops answering (an idle
  connection whose network went silent looks open forever). The liveness check asks whether it
  answers, together with the lock's connection (`_liveness.py`): a network gone silent is found on
  both at once, and the lock is taken again before the queues are woken.

Upkeep runs in a task of its own, apart from the heartbeat (`_leases.py`), so it cannot delay a
lease renewal.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from uuid import UUID

from .._errors import DatabaseTooSlowError
from .._failures import FailureLog
from .._metrics import Metrics
from .._worker_records import MISSED_HEARTBEATS
from ..store._protocol import Listener, Store
from ._retention import Retention

logger = logging.getLogger("starlette_jobs.worker")

_RESCUE_LIMIT = 1000


class Upkeep:
    def __init__(
        self,
        store: Store,
        interval: float,
        retention: float | None,
        wake: Callable[[str], None],
        metrics: Metrics | None = None,
    ) -> None:
        self._store = store
        self._metrics = metrics
        self._interval = interval
        self.retention = Retention(store, interval, retention)
        self._wake = wake
        # How many jobs a rescue takes: fewer after one ran out of time (see `rescue_expired`).
        self._rescue_limit = _RESCUE_LIMIT
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="starlette_jobs upkeep")
        self.retention.start()

    async def stop(self) -> None:
        await self.retention.stop()
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def _run(self) -> None:
        failures = FailureLog(logger, "upkeep")
        while True:
            await asyncio.sleep(self._interval)
            try:
                await self.rescue_expired()
                await self.settle_steps()
                await self.prune_workers()
            except Exception as error:
                failures.failed(error)
            else:
                failures.succeeded()

    async def rescue_expired(self) -> None:
        """Rescues up to `_RESCUE_LIMIT` jobs. A rescue rewrites each job's `errors` (up to
        `MAX_KEPT_ERRORS` long texts): with many long histories the statement can run past the
        statement timeout, and asking for as many again would time out every round, leaving
        every expired job `running` for ever. So a rescue that ran out of time asks for half as
        many next round, and as many until the backlog is worked off."""
        try:
            rescued = await self._store.rescue_expired(self._rescue_limit)
        except DatabaseTooSlowError:
            self._rescue_limit = max(1, self._rescue_limit // 2)
            raise
        if len(rescued) < self._rescue_limit:
            self._rescue_limit = _RESCUE_LIMIT  # none left over: the next ones are new
        for job_id, queue, status in rescued:
            logger.warning("job %s on queue %r: lease expired, now %s", job_id, queue, status.value)
            if self._metrics is not None and self._metrics.recording():
                self._metrics.rescued(queue, status.value, "lease_expired")
            self._wake(queue)

    async def settle_steps(self) -> None:
        """Tells the workflow steps waiting for a step that finished without telling them (a
        rescue failed it, or a worker died between the statements of a cancellation's
        cascade); see docs/workflows.md. Nothing to do, one look at an empty index."""
        settled = await self._store.settle_steps()
        if settled:
            logger.info("told the dependents of %d finished workflow step(s)", settled)

    async def prune_workers(self) -> None:
        """Deletes the registry rows of workers that stopped heartbeating (docs/workers.md)."""
        for worker_id in await self._store.prune_workers(MISSED_HEARTBEATS):
            logger.warning(
                "worker %s: unseen for %g heartbeats, taken for dead", worker_id, MISSED_HEARTBEATS
            )


class Wakeups:
    """LISTEN on the queues' channels; `wake(queue)` on each notification, and on every queue
    whenever the connection is opened again (notifications may have been missed meanwhile);
    `on_cancel(lease_token)` for each cancel request of a running job (any worker's: the
    callee checks whether it runs that attempt; the heartbeat catches requests missed here);
    `on_controls(queue)` for each change of a queue's controls (any queue's).
    Whoever checks the connection calls `answers`, then `reopen` when it did not answer."""

    def __init__(
        self,
        store: Store,
        queues: Sequence[str],
        wake: Callable[[str], None],
        on_cancel: Callable[[UUID], None] | None = None,
        on_controls: Callable[[str], None] | None = None,
    ) -> None:
        self._store = store
        self._queues = list(queues)
        self._wake = wake
        self._on_cancel = on_cancel
        self._on_controls = on_controls
        self._listener: Listener | None = None
        self._stopped = False

    async def start(self) -> None:
        await self._open()

    async def stop(self) -> None:
        self._stopped = True  # a check that ends after this opens nothing again
        if self._listener is not None:
            listener, self._listener = self._listener, None
            await listener.close()

    def terminate(self) -> None:
        self._stopped = True
        if self._listener is not None:
            self._listener.terminate()
            self._listener = None

    @property
    def is_open(self) -> bool:
        """Whether it has a connection (none: it failed to open, or it was stopped)."""
        return self._listener is not None

    async def answers(self, timeout: float) -> bool:
        """Whether the LISTEN connection answers within `timeout` seconds (no, if there is
        none: it failed to open, and polling stands in for it)."""
        return self._listener is not None and await self._listener.alive(timeout)

    async def reopen(self) -> None:
        """Opens the connection again, after `answers` said it did not answer, and wakes every
        queue for the notifications it may have missed. The caller expires the process's other
        connections first: the network likely went silent for all of them."""
        if self._listener is not None:
            logger.warning(
                "the LISTEN connection stopped answering; opening it again, and every other "
                "connection of this process on next use"
            )
            self._listener.terminate()
            self._listener = None
        if not self._stopped and await self._open():
            for queue in self._queues:
                self._wake(queue)

    async def _open(self) -> bool:
        try:
            listener = await self._store.listen(
                self._queues, self._wake, self._on_cancel, self._on_controls
            )
        except Exception as error:  # unreachable, too many connections...: polling still works
            self._listener = None
            logger.warning("LISTEN connection failed, polling until it is back: %s", error)
            return False
        if self._stopped:  # stopped while it opened
            await listener.close()
            return False
        self._listener = listener
        return True
