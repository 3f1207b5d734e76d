"""Group commit of job outcomes: whatever finished while one write was in flight goes in the next.

A job therefore costs no transaction of its own on the hot path, and an idle worker still writes
an outcome as soon as the job ends (there is no timer to wait for).

No outcome may hold up the others: one the database refuses is written again alone, without its
values; values are bounded where they are made (`_storable`), and a batch whose values add up to
more than `MAX_STATEMENT_LENGTH` goes in several statements, so that none runs long enough to be
taken for an outage and retried, batch and all, for ever; and a batch that runs out of time all
the same is asked which of its outcomes wait for a row another transaction holds locked (an
operator's `SELECT ... FOR UPDATE` on the job's row, or on a workflow step waiting for it): those
are set aside, looked at again every `LOCKED_RECHECK` seconds and written once
free, and the others written at once; if none is locked (many jobs with a long `errors`
history), it is sent again in halves until it fits.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import Callable
from time import perf_counter
from uuid import UUID

from .._attempt_records import Outcome
from .._errors import DatabaseTooSlowError, DatabaseUnavailableError
from .._failures import FailureLog
from .._metrics import Metrics
from .._storable import MAX_OUTCOME_LENGTH, MAX_STATEMENT_LENGTH
from ..store._connectivity import Backoff
from ..store._protocol import Store

logger = logging.getLogger("starlette_jobs.worker")

LOCKED_RECHECK = 1.0
"""Seconds between looks at whether the rows of outcomes set aside (locked by another
transaction) are free."""


class OutcomeWriter:
    def __init__(self, store: Store, metrics: Metrics | None = None) -> None:
        self._store = store
        self._metrics = metrics
        self._buffer: list[Outcome] = []
        self._in_flight: list[Outcome] = []
        # Outcomes whose job's row another transaction held locked when their write ran out of
        # time: set aside, so as not to hold up the others, until the row is free.
        self._locked: list[Outcome] = []
        self._locked_checked = 0.0  # when (loop time) they were last looked at
        # What to do once an outcome is written (by its attempt's lease token): few have any.
        self._after: dict[UUID, Callable[[], None]] = {}
        self._completed: set[UUID] = set()
        """Lease tokens of attempts that wrote their success themselves (`complete_in`)."""
        self._pending = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._task: asyncio.Task[None] | None = None
        # The most outcomes a statement takes while a batch is written after one ran out of
        # time (None: no bound but their values'). See `_write_in_flight`.
        self._most: int | None = None
        self.written = asyncio.Event()
        """Set after each write; `drain` waits on it."""

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="starlette_jobs outcome writer")

    def add(
        self, outcome: Outcome, then: Callable[[], None] | None = None, *, completed: bool = False
    ) -> None:
        """Queues `outcome` for the next write; `then` is called once it is written (not if
        the fence refused it). `completed`: the attempt wrote its success itself
        (`complete_in`), so a refusal means that success committed, not a lost lease."""
        buffer = self._buffer
        buffer.append(outcome)
        if then is not None:
            self._after[outcome.lease_token] = then
        if completed:
            self._completed.add(outcome.lease_token)
        if len(buffer) == 1:
            # The first since the buffer was taken (or put back after an outage): the others
            # found the writer told already. While the buffer holds outcomes, `_pending` stays
            # set (only taking the buffer clears it) and `_idle` clear (set only when the
            # buffer is empty): two calls per outcome saved on a busy worker.
            self._idle.clear()
            self._pending.set()

    def completed(self, token: UUID) -> bool:
        """The attempt of `token` wrote its success itself and its outcome waits here."""
        return token in self._completed

    def held(self) -> list[tuple[int, UUID]]:
        """Leases of jobs that have ended but whose outcome is not written yet: they must be
        renewed like those of running jobs, or a long outage would hand finished jobs to
        another worker."""
        return [(o.id, o.lease_token) for o in (*self._in_flight, *self._buffer, *self._locked)]

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
        failures = FailureLog(logger, "recording job outcomes")
        while True:
            if self._locked:
                await self._wait_or_recheck_locked()
            else:
                await self._pending.wait()
            self._pending.clear()
            self._in_flight, self._buffer = self._buffer, []
            try:
                await self._write_in_flight()
            except DatabaseUnavailableError as error:
                # Keep those not written: they are written once the database answers again, and
                # their leases are renewed meanwhile (see `held`).
                self._buffer[:0] = self._in_flight
                self._in_flight = []
                self._pending.set()
                failures.failed(error)
                await backoff.wait()
                continue
            backoff.reset()
            failures.succeeded()
            self._most = None  # the batch that was too slow is written
            if not self._buffer and not self._locked:
                self._idle.set()
            self.written.set()

    async def _write_in_flight(self) -> None:
        """Writes `_in_flight`, one statement after another (one, unless their values are
        large), taking each outcome off it once it is written or refused: a database error
        leaves only those not written yet to try again."""
        while self._in_flight:
            count = _next_statement(self._in_flight)
            if self._most is not None:
                count = min(count, self._most)
            statement = self._in_flight[:count]
            try:
                written = await self._settle(statement)
            except DatabaseTooSlowError:
                # Ran out of time, most likely waiting for a row another transaction holds
                # locked: sent again, the batch would wait for it again, for as long as the lock
                # lasts, and hold back every outcome of this worker. Those set aside, the
                # others are written now.
                if await self._set_aside_locked(statement):
                    continue
                # None locked. Each outcome rewrites its job's row, `errors` included (up to
                # 100 long texts), so many jobs with a long history can make a statement slow
                # whatever the values sent: sent again whole, it would time out again, for
                # ever. Half as many next time, until this batch is written.
                self._most = max(1, len(statement) // 2)
                raise
            except DatabaseUnavailableError:
                raise
            except Exception:
                # Not the connection: one outcome the database refuses (a value it cannot
                # store) must not keep the others from being written. Write them one at a time.
                logger.exception(
                    "writing %d outcome(s) failed; writing them one by one", len(statement)
                )
                for outcome in statement:
                    alone = len(statement) == 1
                    self._done([outcome], await self._write_one(outcome, stripped=alone))
                continue
            self._done(statement, written)

    async def _set_aside_locked(self, statement: list[Outcome]) -> bool:
        """Takes the outcomes of `statement` (the first of `_in_flight`) that wait for a row
        another transaction holds locked off `_in_flight`, into `_locked`; returns whether
        there were any."""
        locked = await self._store.locked_jobs([o.id for o in statement])
        if not locked:
            return False
        aside = [o for o in statement if o.id in locked]
        self._in_flight[: len(statement)] = [o for o in statement if o.id not in locked]
        self._locked += aside
        self._locked_checked = asyncio.get_running_loop().time()
        logger.warning(
            "%d job outcome(s) wait for rows another transaction holds locked (theirs, or "
            "steps waiting for them; an operator's SELECT ... FOR UPDATE?): the others are "
            "written meanwhile: %s",
            len(aside), sorted(o.id for o in aside),
        )  # fmt: skip
        return True

    async def _wait_or_recheck_locked(self) -> None:
        """Waits for outcomes to write, or `LOCKED_RECHECK` seconds, then puts back those set
        aside whose rows are free now (for the next write, before the rest)."""
        loop = asyncio.get_running_loop()
        wait = self._locked_checked + LOCKED_RECHECK - loop.time()
        if wait > 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._pending.wait(), wait)
            if loop.time() < self._locked_checked + LOCKED_RECHECK:
                return  # outcomes to write came first
        self._locked_checked = loop.time()
        try:
            locked = await self._store.locked_jobs([o.id for o in self._locked])
        except DatabaseUnavailableError:
            return  # looked at again next time; the write says what is wrong
        free = [o for o in self._locked if o.id not in locked]
        if free:
            self._locked = [o for o in self._locked if o.id in locked]
            self._buffer[:0] = free
            self._pending.set()

    async def _settle(self, statement: list[Outcome]) -> set[int]:
        """`record_outcomes`, timed as a settle operation when an SDK records metrics."""
        metrics = self._metrics
        if metrics is None or not metrics.recording():
            return await self._store.record_outcomes(statement)
        started = perf_counter()
        try:
            written = await self._store.record_outcomes(statement)
        except Exception as error:
            metrics.settled(len(statement), perf_counter() - started, error)
            raise
        metrics.settled(len(statement), perf_counter() - started, None)
        return written

    def _done(self, outcomes: list[Outcome], written: set[int]) -> None:
        """`outcomes`, the first of `_in_flight`, were sent: `written` are the ids written."""
        del self._in_flight[: len(outcomes)]
        for outcome in outcomes:
            then = self._after.pop(outcome.lease_token, None)
            completed = False
            if self._completed:  # rare: an empty set costs a busy worker nothing
                completed = outcome.lease_token in self._completed
                self._completed.discard(outcome.lease_token)
            if outcome.id in written or completed:
                if then is not None:
                    then()
            else:
                logger.warning(
                    "job %s: outcome %r not recorded: this worker no longer holds its lease "
                    "(it expired and the job was rescued, or it was released)",
                    outcome.id, outcome.status.value,
                )  # fmt: skip

    async def _write_one(self, outcome: Outcome, *, stripped: bool = False) -> set[int]:
        """Writes `outcome` alone; if the database refuses it, writes it again without its
        values (`stripped`: only that). Refused then too, it is given up (the ids written: none),
        and the job is rescued once its lease expires."""
        if stripped:
            outcome = _without_values(outcome)
        try:
            return await self._store.record_outcomes([outcome])
        except DatabaseUnavailableError:
            raise
        except Exception:
            logger.exception("job %s: outcome refused by the database", outcome.id)
            if stripped:
                return set()
            return await self._write_one(outcome, stripped=True)


def _without_values(outcome: Outcome) -> Outcome:
    """The outcome with only what happened (its status, and its retry delay): none of the
    values the job made, which the database may refuse or take long to write. The progress
    written before stays."""
    return dataclasses.replace(
        outcome,
        error=None if outcome.error is None else "(the error text could not be stored)",
        result=None,
        progress=None,
    )


def _next_statement(outcomes: list[Outcome]) -> int:
    """How many of `outcomes`, from the first, go in the next statement: all of them, unless
    their values pass `MAX_STATEMENT_LENGTH` characters (then as many as fit, at least one).
    An outcome larger than any the worker makes is replaced in `outcomes` by its stripped
    self: sent whole, it could hold the others up for ever."""
    length = 0
    for index, outcome in enumerate(outcomes):
        size = len(outcome.result or "") + len(outcome.progress or "") + len(outcome.error or "")
        if size > MAX_OUTCOME_LENGTH:
            logger.error(
                "job %s: outcome holds %d characters of values, more than any job can make "
                "(%d at most); written without them",
                outcome.id, size, MAX_OUTCOME_LENGTH,
            )  # fmt: skip
            outcomes[index] = _without_values(outcome)
            size = len(outcomes[index].error or "")
        length += size
        if length > MAX_STATEMENT_LENGTH:
            return max(index, 1)
    return len(outcomes)
