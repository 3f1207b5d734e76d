"""Group commit of job outcomes: whatever finished while one write was in flight goes in the next.

A job therefore costs no transaction of its own on the hot path, and an idle worker still writes
an outcome as soon as the job ends (there is no timer to wait for).
"""

from __future__ import annotations

import asyncio
import logging

from ._connectivity import DATABASE_ERRORS, Backoff
from ._store import Outcome, Store

logger = logging.getLogger("starlette_jobs.worker")


class OutcomeWriter:
    def __init__(self, store: Store) -> None:
        self._store = store
        self._buffer: list[Outcome] = []
        self._pending = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._task: asyncio.Task[None] | None = None
        self.written = asyncio.Event()
        """Set after each write; `drain` waits on it."""

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="starlette_jobs outcome writer")

    def add(self, outcome: Outcome) -> None:
        self._buffer.append(outcome)
        self._idle.clear()
        self._pending.set()

    async def flush(self) -> None:
        """Returns once everything added so far is written (or refused by the fence)."""
        await self._idle.wait()

    async def stop(self, timeout: float) -> None:
        """Flushes for at most `timeout` seconds (the database may be gone), then stops."""
        try:
            await asyncio.wait_for(self.flush(), timeout)
        except TimeoutError:
            logger.error(
                "%d job outcome(s) could not be recorded before shutdown; those jobs will run "
                "again once their lease expires",
                len(self._buffer),
            )
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def _run(self) -> None:
        backoff = Backoff()
        while True:
            await self._pending.wait()
            self._pending.clear()
            batch, self._buffer = self._buffer, []
            try:
                written = await self._store.record_outcomes(batch)
            except DATABASE_ERRORS as error:
                # Keep them: the outcome is written once the database answers again. Until then
                # the leases are not extended, so a long outage may hand them to another worker.
                self._buffer[:0] = batch
                self._pending.set()
                logger.warning(
                    "could not record %d job outcome(s), retrying: %s", len(batch), error
                )
                await backoff.wait()
                continue
            backoff.reset()
            for outcome in batch:
                if outcome.id not in written:
                    logger.warning(
                        "job %s: outcome %r not recorded: this worker no longer holds its lease "
                        "(it expired and the job was rescued, or it was released)",
                        outcome.id, outcome.status.value,
                    )  # fmt: skip
            if not self._buffer:
                self._idle.set()
            self.written.set()
