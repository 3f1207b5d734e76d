"""`JobDraining`: the part of `Jobs` that runs this process's queues until they are empty
(`jobs.drain`: for tests and scripts, and `starlette-jobs worker --burst`), through the worker
the `Jobs` it belongs to has started (`worker/_drain.py` does the counting)."""

from __future__ import annotations

import asyncio
import math

from ._errors import NotStartedError
from .worker._settings import DEFAULT_RETRY_WAIT, check_drain_durations
from .worker._worker import Worker


class JobDraining:
    """The part of `Jobs` that drains; `Jobs` supplies `_worker` and `_preparing`."""

    _worker: Worker | None
    _preparing: asyncio.Task[None] | None

    async def drain(
        self,
        timeout: float = 30.0,
        *,
        include_scheduled: bool = True,
        retry_wait: float = DEFAULT_RETRY_WAIT,
    ) -> None:
        """Runs this process's queues until no job of them is running, or pending and due before
        `timeout` ends (retries waiting for their delay included), and every outcome is
        written. For tests and scripts. Logs what it leaves pending.

        Args:
            timeout: seconds to wait at most; `math.inf` waits as long as it takes.
            include_scheduled: False waits only for what is due now, and for retries due within
                `retry_wait` seconds (a short back-off is part of running a job); jobs
                delayed with `delay=` or `run_at=` are left, however soon they come due.
            retry_wait: with `include_scheduled=False`, how far ahead a retry is waited for
                (never past `timeout`); 0 leaves every retry that is not due yet.

        Raises:
            TimeoutError: work was still left after `timeout` seconds.
            ValueError: `timeout` or `retry_wait` is NaN or negative.
        """
        check_drain_durations(timeout, retry_wait)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        if self._preparing is not None:
            # Started while PostgreSQL was unreachable: the worker starts once it answers.
            async with asyncio.timeout_at(deadline if math.isfinite(deadline) else None):
                await asyncio.shield(self._preparing)
        if self._worker is None:
            raise NotStartedError(
                "drain needs a running worker: start Jobs with at least one queue in `queues=`"
            )
        await self._worker.drain(
            deadline - loop.time(), include_scheduled=include_scheduled, retry_wait=retry_wait
        )
