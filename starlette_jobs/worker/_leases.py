"""The heartbeat: renews the leases of this worker's attempts, and finds the ones it lost.

It runs in a task of its own, on a connection of its own, and its statement never waits on a
row lock: nothing else (a locked row, rescue, pruning, a LISTEN reconnect, a busy pool) can make
a worker's leases run out while its jobs still run.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from uuid import UUID

from .._failures import FailureLog
from ..store._connectivity import Backoff
from ..store._protocol import Store

logger = logging.getLogger("starlette_jobs.worker")

Held = list[tuple[int, UUID]]
"""(job id, lease token) of every attempt whose lease this worker must keep."""


class LeaseKeeper:
    """Renews every `lease_duration / 3` the leases `held()` names; calls `on_lost(job_id, token)`
    for an attempt whose job is no longer held under its token (rescued after it expired, or
    released by an operator), and `on_cancel(token)` for one whose job `jobs.cancel` asked to
    stop: the fallback, should the request's notification have been lost."""

    def __init__(
        self,
        store: Store,
        lease_duration: float,
        held: Callable[[], Held],
        on_lost: Callable[[int, UUID], None],
        on_cancel: Callable[[UUID], None] | None = None,
    ) -> None:
        self._store = store
        self._lease_duration = lease_duration
        self._held = held
        self._on_lost = on_lost
        self._on_cancel = on_cancel
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="starlette_jobs leases")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def _run(self) -> None:
        interval = self._lease_duration / 3
        backoff = Backoff(cap=interval)
        failures = FailureLog(logger, "renewing leases")
        while True:
            try:
                await self.renew()
            except Exception as error:
                # The lane opens a new connection for the next try: try again soon rather than
                # a whole interval later, while the leases still hold.
                failures.failed(error)
                await backoff.wait()
                continue
            backoff.reset()
            failures.succeeded()
            await asyncio.sleep(interval)

    async def renew(self) -> None:
        held = self._held()
        if not held:
            return
        renewed = await self._store.extend_leases(held, self._lease_duration)
        # An outcome written while the renewal was in flight cleared its lease: not a loss.
        still_held = {token for _, token in self._held()}
        for job_id, token in held:
            if token not in still_held:
                continue
            renewal = renewed.get(token)
            if renewal is None:
                self._on_lost(job_id, token)
                continue
            if renewal.cancel_requested and self._on_cancel is not None:
                self._on_cancel(token)
            if not renewal.renewed:
                logger.warning(
                    "job %s: lease not renewed this round: another transaction holds its row "
                    "locked",
                    job_id,
                )
