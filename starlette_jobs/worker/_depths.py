"""What the worker records of its work in metrics (docs/metrics.md): each attempt, and the gauges
of the queues, which one worker of those sharing a database reads.

`DepthReporter` reads the registry (`Store.list_workers`) every `interval` seconds (the
upkeep's cadence, a third of the lease), and, if this worker has the smallest id of the live
ones, the depth of every queue (`Store.queue_depths`: the unfinished jobs only, through the
indexes of pending and running jobs). Its `Metrics` keeps what it read; the observable gauges
report that when the SDK collects. The others keep nothing, so N workers report one value per
queue, not N: while the registry changes (a worker with a smaller id starts, or the reporter
dies), two may report, or none, for one interval. Without an SDK it reads nothing.
"""

from __future__ import annotations

import asyncio
import logging

from .._attempt_records import Claim, Outcome
from .._failures import FailureLog
from .._metrics import Metrics
from .._records import JobStatus
from ..store._protocol import Store
from ._context import AttemptControl

logger = logging.getLogger("starlette_jobs.worker")

_OUTCOMES = {
    JobStatus.SUCCEEDED: "succeeded",
    JobStatus.FAILED: "failed",
    JobStatus.CANCELLED: "cancelled",
    JobStatus.PENDING: "retried",
}


def record_attempt(
    metrics: Metrics, claim: Claim, outcome: Outcome, seconds: float, control: AttemptControl
) -> None:
    """One attempt's `messaging.process.duration`, and a retry's count."""
    metrics.processed(
        claim.queue,
        claim.name,
        seconds,
        _OUTCOMES.get(outcome.status, outcome.status.value),
        control.error_type,
    )


class DepthReporter:
    """Reads the queues' depths while this worker is the reporter; see the module's docstring."""

    def __init__(self, store: Store, worker_id: str, metrics: Metrics, interval: float) -> None:
        self._store = store
        self._worker_id = worker_id
        self._metrics = metrics
        self._interval = interval
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="starlette_jobs queue depths")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        self._metrics.depths = []  # a stopped worker reports nothing

    async def _run(self) -> None:
        failures = FailureLog(logger, "reading the queues' depths")
        while True:
            try:
                await self.round()
            except Exception as error:
                failures.failed(error)
            else:
                failures.succeeded()
            await asyncio.sleep(self._interval)

    async def round(self) -> bool:
        """Reads the depths if this worker is the reporter (and an SDK records them); returns
        whether it did. What it read before is dropped either way, and when the read fails:
        depths from before an outage would go on showing a backlog long since worked off (or
        hide one that grew), where no value says that none is known."""
        try:
            reporting = self._metrics.recording() and await self._is_reporter()
            self._metrics.depths = await self._store.queue_depths() if reporting else []
        except Exception:
            self._metrics.depths = []
            raise
        return reporting

    async def _is_reporter(self) -> bool:
        """Whether this worker has the smallest id of the live ones in the registry (the store
        lists the live ones only, by the database's clock)."""
        live = [worker.id for worker in await self._store.list_workers()]
        return self._worker_id in live and min(live) == self._worker_id
