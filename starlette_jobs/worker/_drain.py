"""`drain`: waits until the jobs of a worker's queues have run (`jobs.drain`, `worker --burst`,
the testing kit's `run_enqueued`), counting what is left on the store, not in this process."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from .._attempt_records import Unfinished
from .._errors import DatabaseUnavailableError
from .._failures import FailureLog
from ..store._protocol import Store
from ._outcomes import OutcomeWriter
from ._settings import check_drain_durations, drain_horizon, log_left_pending

logger = logging.getLogger("starlette_jobs.worker")


@dataclass(frozen=True)
class Draining:
    """What a drain needs of the worker it drains."""

    queue_names: Sequence[str]
    paused_queues: Callable[[], Awaitable[set[str]]]
    wake: Callable[[str], None]
    running_count: Callable[[], int]
    outcomes: OutcomeWriter
    # The job names it claims (None: any); pending jobs of others are left to a worker that
    # knows them, or to the grace of deploy-aware claiming (`_strays`), not waited for.
    known_names: Sequence[str] | None


async def drain(
    store: Store,
    worker: Draining,
    timeout: float,
    *,
    include_scheduled: bool,
    retry_wait: float = 0.0,
) -> Unfinished:
    """Waits until no job of the worker's queues is running anywhere, or pending and due now,
    or a retry due within `retry_wait` seconds (with `include_scheduled`, any of them due before
    the timeout ends). Returns, and logs, what it leaves pending.

    The pending jobs of a paused queue are not waited for (they would be until a resume, which
    may never come): its jobs running here still are, and the drain says which queues it left."""
    check_drain_durations(timeout, retry_wait)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    wait = math.inf if include_scheduled else 0.0
    retry_wait = math.inf if include_scheduled else max(retry_wait, 0.0)
    paused_told: set[str] = set()
    failures = FailureLog(logger, "drain: counting the jobs left")
    async with asyncio.timeout_at(deadline if math.isfinite(deadline) else None):
        while True:
            for queue in worker.queue_names:
                worker.wake(queue)
            if worker.running_count() == 0:
                paused = await worker.paused_queues()
                if paused - paused_told:
                    logger.info(
                        "drain: queue(s) %s paused: their pending jobs are left for a resume",
                        ", ".join(sorted(paused)),
                    )
                    paused_told |= paused
                working = [queue for queue in worker.queue_names if queue not in paused]
                await worker.outcomes.flush()
                remaining = deadline - loop.time()
                retry_horizon = drain_horizon(remaining, retry_wait)
                try:
                    left = await store.count_unfinished(
                        working, drain_horizon(remaining, wait), retry_horizon, worker.known_names
                    )
                except DatabaseUnavailableError as error:  # e.g. PostgreSQL restarting: keep going
                    failures.failed(error)
                    await asyncio.sleep(0.5)
                else:
                    failures.succeeded()
                    # Looked at again: a job claimed here during the count may have written
                    # its own success (`complete_in`), finished in the table while its code
                    # goes on.
                    if left.waited == 0 and worker.running_count() == 0:
                        log_left_pending(left, retry_horizon)
                        return left
            worker.outcomes.written.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(worker.outcomes.written.wait(), 0.05)
