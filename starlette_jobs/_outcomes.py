"""Group commit of job outcomes: whatever finished while one write was in flight goes in the next.

A job therefore costs no transaction of its own on the hot path, and an idle worker still writes
an outcome as soon as the job ends (there is no timer to wait for).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable
from uuid import UUID

from ._connections import DATABASE_ERRORS
from ._connectivity import Backoff
from ._records import Outcome
from ._store import Store

logger = logging.getLogger("starlette_jobs.worker")


class OutcomeWriter:
    def __init__(self, store: Store) -> None:
        self._store = store
        self._buffer: list[Outcome] = []
        self._in_flight: list[Outcome] = []
        # What to do once an outcome is written (by its attempt's lease token): few have any.
        self._after: dict[UUID, Callable[[], None]] = {}
        self._pending = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._task: asyncio.Task[None] | None = None
        self.written = asyncio.Event()
        """Set after each write; `drain` waits on it."""

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="starlette_jobs outcome writer")

    def add(self, outcome: Outcome, then: Callable[[], None] | None = None) -> None:
        """Queues `outcome` for the next write; `then` is called once it is written (not if
        the fence refused it)."""
        self._buffer.append(outcome)
        if then is not None:
            self._after[outcome.lease_token] = then
        self._idle.clear()
        self._pending.set()

    def held(self) -> list[tuple[int, UUID]]:
        """Leases of jobs that have ended but whose outcome is not written yet: they must be
        renewed like those of running jobs, or a long outage would hand finished jobs to
        another worker."""
        return [(o.id, o.lease_token) for o in (*self._in_flight, *self._buffer)]

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
                len(self.held()),
            )
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def _run(self) -> None:
        backoff = Backoff()
        while True:
            await self._pending.wait()
            self._pending.clear()
            self._in_flight, self._buffer = self._buffer, []
            try:
                written = await self._write(self._in_flight)
            except DATABASE_ERRORS as error:
                # Keep them: they are written once the database answers again, and their leases
                # are renewed meanwhile (see `held`).
                self._buffer[:0] = self._in_flight
                self._in_flight = []
                self._pending.set()
                logger.warning(
                    "could not record %d job outcome(s), retrying: %s", len(self._buffer), error
                )
                await backoff.wait()
                continue
            backoff.reset()
            for outcome in self._in_flight:
                then = self._after.pop(outcome.lease_token, None)
                if outcome.id in written:
                    if then is not None:
                        then()
                else:
                    logger.warning(
                        "job %s: outcome %r not recorded: this worker no longer holds its lease "
                        "(it expired and the job was rescued, or it was released)",
                        outcome.id, outcome.status.value,
                    )  # fmt: skip
            self._in_flight = []
            if not self._buffer:
                self._idle.set()
            self.written.set()

    async def _write(self, batch: list[Outcome]) -> set[int]:
        try:
            return await self._store.record_outcomes(batch)
        except DATABASE_ERRORS:
            raise
        except Exception:
            # Not the connection: one outcome the database refuses (a value it cannot store)
            # must not keep the others from being written. Write them one at a time.
            logger.exception("writing %d outcome(s) failed; writing them one by one", len(batch))
        written: set[int] = set()
        for outcome in batch:
            written |= await self._write_one(outcome)
        return written

    async def _write_one(self, outcome: Outcome, *, stripped: bool = False) -> set[int]:
        try:
            return await self._store.record_outcomes([outcome])
        except DATABASE_ERRORS:
            raise
        except Exception:
            logger.exception("job %s: outcome refused by the database", outcome.id)
            if stripped:
                return set()  # the lease expires and the job is rescued
            # Keep what happened (the status); give up on the values that could not be stored.
            plain = dataclasses.replace(
                outcome,
                error=None if outcome.error is None else "(the error text could not be stored)",
                result=None,
            )
            return await self._write_one(plain, stripped=True)
