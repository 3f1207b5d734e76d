"""`Ticker`: a worker's part in periodic jobs. At start it writes the schedules its code
declares (the store deletes those the code no longer has); then it records each tick that comes
due, which enqueues its job. Every worker does so, with no leader: the store records a tick once
(the first worker to insert it wins), and only while the stored definition is the worker's own,
so older code stops ticking a schedule that newer code changed or removed.

It sleeps until the next tick due (the earliest over its schedules), at most `MAX_SLEEP`, then
reads the stored schedules again: how far their ticks were recorded, by any worker, and whether
their definitions are still its own.

A `@periodic` declared after the worker started (in a module imported late) is ticked too: the
ticker reads the process's declarations before each round and about once a second while it
sleeps, and declares the new ones then, leaving the other workers' schedules be.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import NamedTuple

from .._cron import MAX_TICKS_PER_ROUND, plan_ticks
from .._failures import FailureLog
from .._metrics import Metrics
from .._schedule_records import CLOCK_SET_BACK, ScheduleBusyError, StoredSchedule, TickStatus
from .._schedules import Schedule, registered_schedules
from ..store._protocol import Store
from ._schedule_declarations import Declarations
from ._schedule_holders import defined_otherwise, held_by_no_other
from ._schedule_warnings import ScheduleWarnings

logger = logging.getLogger("starlette_jobs.worker")

MAX_SLEEP = 60.0
"""The longest a ticker sleeps between looks at the stored schedules."""
ON_TIME_SLACK = timedelta(seconds=2)
"""How late a tick may be recorded and still count as on time: another worker may be about to
record a tick that came due just before this one started, or its last look. A tick found due
longer ago than this was missed, whatever kept it (no worker running, the database unreachable,
the process stopped or its event loop blocked, a round that hung): the catch-up policy
decides."""
CATCH_UP_PER_ROUND = timedelta(seconds=1)
"""How long a round records missed ticks (caught up, or skipped) before it leaves the rest to
the next round, which follows at once: recorded one transaction each, a backlog of a thousand
held a round for 10 s, and the other schedules' ticks due meanwhile came more than
`ON_TIME_SLACK` late to the next, and were taken for missed. Each schedule records one missed
tick a round all the same, so that none waits behind another's backlog for ever."""
LATE_WAKE_WARNING = timedelta(seconds=10)
"""A round that starts this long past the end of its sleep logs a warning: the process was
stopped or its event loop blocked."""
REFUSED_RECHECK = 1.0
"""Seconds before looking again at a schedule one of whose ticks the store did not record."""
WAITING_RECHECK = 1.0
"""Seconds between looks at whether the job a tick waits for has finished."""
RETRY_AFTER = 5.0
"""Seconds before trying again after the database failed a round."""
DECLARATIONS_RECHECK = 1.0
"""Seconds between looks, while the ticker sleeps, at whether a schedule was declared since."""
KEPT_TICKS = 100
"""Ticks kept per schedule; older ones are deleted about once a minute."""
_PRUNE_EVERY = timedelta(minutes=1)


class _Recorded(NamedTuple):
    """What `Ticker._record_due` did for one schedule."""

    until: datetime
    """The latest tick recorded (or found recorded)."""
    waits: bool
    """One of them waits (`overlap="one_waiting"`)."""
    full: bool
    """It recorded as many as a round may (`MAX_TICKS_PER_ROUND`), or missed ones for as long
    (`CATCH_UP_PER_ROUND`): more may be due."""
    refused: bool
    """The store recorded one of them not: another worker had, or not due by its clock, or the
    schedule's row was locked elsewhere."""


def utc_now() -> datetime:
    return datetime.now(UTC)


class Ticker:
    """Records the ticks of `schedules` as they come due; see the module's docstring."""

    def __init__(
        self,
        store: Store,
        schedules: Sequence[Schedule],
        worker_id: str,
        clock: Callable[[], datetime] = utc_now,
        *,
        declared: Callable[[], Sequence[Schedule]] = registered_schedules,
        metrics: Metrics | None = None,
    ) -> None:
        """`schedules`: those to tick from the start; `declared`: the process's declarations,
        whose later additions (and redeclarations) are ticked too."""
        self._store = store
        self._metrics = metrics
        # The schedules this process declares, and their writing to the store.
        self._declarations = Declarations(store, schedules, declared)
        self._worker_id = worker_id
        self._clock = clock
        # Ticks after this were due while this ticker ran: on time. Earlier ones, not yet
        # recorded, were missed while no worker ran: the catch-up policy decides.
        self._on_time_since = clock() - ON_TIME_SLACK
        # Per schedule, the earliest tick the store refused (not due by the database's clock,
        # which runs behind this worker's; or recorded by another worker meanwhile) and that
        # is not recorded yet: still on time, however far behind this worker's clock it falls.
        self._refused: dict[str, datetime] = {}
        # When the sleep after the last round should have ended (None: until a declaration).
        self._wake_by: datetime | None = None
        self._pruned_at: datetime | None = None
        # What it tells the operator of the schedules it does not tick when it should.
        self._warnings = ScheduleWarnings()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="starlette_jobs ticker")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def _run(self) -> None:
        failures = FailureLog(logger, "ticking the schedules")
        while True:
            try:
                wait = await self.round()
            except Exception as error:
                failures.failed(error)
                wait = RETRY_AFTER
            else:
                failures.succeeded()
            await self._sleep(wait)

    async def _sleep(self, wait: float | None) -> None:
        """Sleeps `wait` seconds (None: until a schedule is declared), or until a schedule is
        declared, whichever comes first."""
        loop = asyncio.get_running_loop()
        until = math.inf if wait is None else loop.time() + wait
        while True:
            await asyncio.sleep(max(0.0, min(until - loop.time(), DECLARATIONS_RECHECK)))
            if loop.time() >= until or self._declarations.changed():
                return

    async def round(self) -> float | None:
        """Declares the schedules if not done yet, records the ticks due, and returns how long
        to sleep until the next (None: this process declares no schedule)."""
        started = self._clock()
        self._warn_if_late(started)
        # Found due longer ago than the slack: missed, not on time (see ON_TIME_SLACK), so a
        # process stopped for an hour, in its sleep or in a round, does not enqueue the hour's
        # ticks at once as on time.
        if self._on_time_since - started > CLOCK_SET_BACK:
            self._on_time_since = started - ON_TIME_SLACK  # the clock was set back
        else:
            self._on_time_since = max(self._on_time_since, started - ON_TIME_SLACK)
        try:
            wait = await self._round()
        except BaseException:
            # The ticks that come due until a round gets through (the database unreachable)
            # are found more than the slack late by the next: missed, as after a restart.
            self._wake_by = self._clock() + timedelta(seconds=RETRY_AFTER)
            raise
        self._wake_by = None if wait is None else self._clock() + timedelta(seconds=wait)
        return wait

    def _warn_if_late(self, now: datetime) -> None:
        """Tells the operator of a round that starts well past the end of the sleep the last
        one asked for: the process was stopped (SIGSTOP, a paused VM) or its event loop
        blocked, and the ticks due meanwhile were missed."""
        if self._wake_by is not None and now - self._wake_by > LATE_WAKE_WARNING:
            logger.warning(
                "the schedules' ticker woke %.0f s past its planned wake-up (the process was "
                "stopped or its event loop blocked): the ticks due meanwhile were missed, and "
                "their catch-up policy decides",
                (now - self._wake_by).total_seconds(),
            )

    async def _round(self) -> float | None:
        declarations = self._declarations
        declarations.follow()
        if not declarations.schedules:
            # A process that declares none (a script draining a queue, a worker of code that
            # imports no schedule) is not code that removed them all: it leaves them be.
            return None
        await declarations.write()
        now = self._clock()
        stored = {row.name: row for row in await self._store.list_schedules()}
        mismatched = defined_otherwise(declarations.hashes, stored)
        if mismatched and (
            orphaned := await held_by_no_other(self._store, self._worker_id, mismatched, stored)
        ):
            await declarations.write_again(orphaned, stored)
            stored = {row.name: row for row in await self._store.list_schedules()}
        next_due: datetime | None = None
        waiting = behind = refused = False
        self._warnings.round_begins()
        for schedule in declarations.schedules:
            row = stored.get(schedule.name)
            definition_hash = declarations.hashes[schedule.name]
            if row is None or row.definition_hash != definition_hash:
                # Another live worker's code holds it as stored: not ours to tick, nor a tick
                # refused before ours to keep on time should it be ours again later.
                self._refused.pop(schedule.name, None)
                self._warnings.held_elsewhere(schedule.name, removed=row is None)
                continue
            self._warnings.ours(schedule.name)
            recorded = await self._record_due(
                schedule, row, definition_hash, now, catch_up_until=now + CATCH_UP_PER_ROUND
            )
            behind, refused = behind or recorded.full, refused or recorded.refused
            if schedule.overlap == "one_waiting" and (
                recorded.waits or row.waiting_tick_at is not None
            ):
                started = await self._start_waiting(schedule, row, definition_hash)
                waiting = waiting or not started
            upcoming = schedule.cron.next_after(max(recorded.until, now))
            if upcoming is not None and (next_due is None or upcoming < next_due):
                next_due = upcoming
        self._warnings.round_ended()
        self._on_time_since = now - ON_TIME_SLACK
        await self._prune(now)
        if behind:
            return 0.0  # a backlog longer than a round: the next goes on at once
        wait = MAX_SLEEP
        if next_due is not None:
            # A few ms past the tick: the clock read on waking must be at or after it.
            wait = min(wait, max(0.0, (next_due - self._clock()).total_seconds()) + 0.005)
        if refused:
            # A tick the store did not record: another worker did, or it is not due yet by the
            # database's clock (this one runs fast). Looked at again in a second, not a period.
            wait = min(wait, REFUSED_RECHECK)
        return min(wait, WAITING_RECHECK) if waiting else wait

    async def _record_due(
        self,
        schedule: Schedule,
        row: StoredSchedule,
        definition_hash: str,
        now: datetime,
        catch_up_until: datetime,
    ) -> _Recorded:
        """Records the ticks of `schedule` due by `now`; missed ones (caught up, or skipped)
        only until the clock reads `catch_up_until`, one at least (see `CATCH_UP_PER_ROUND`)."""
        recorded_until = max(row.last_tick_at or row.defined_at, row.defined_at)
        on_time_since = self._on_time_since
        if recorded_until - now > CLOCK_SET_BACK:
            # Recorded while the clocks ran ahead: the store takes ticks from now on again.
            self._warnings.ahead_of_the_clock(schedule.name, recorded_until, now)
            recorded_until = on_time_since
        else:
            self._warnings.clock_right(schedule.name)
        refused_at = self._refused.pop(schedule.name, None)  # set again below if still refused
        if refused_at is not None and refused_at > recorded_until:
            # Refused as early before: found due late by this worker's clock only.
            on_time_since = min(on_time_since, refused_at - timedelta(microseconds=1))
        planned = plan_ticks(schedule.cron, schedule.catch_up, recorded_until, on_time_since, now)
        waits = refused = cut_short = False
        for position, tick in enumerate(planned):
            missed = tick.skipped is not None or tick.note is not None
            if missed and position and self._clock() >= catch_up_until:
                cut_short = True  # the rest at the next round, which follows at once
                break
            new = schedule.new_tick(
                definition_hash, tick.at, self._worker_id, skipped=tick.skipped, note=tick.note
            )
            try:
                recorded = await self._store.record_tick(new)
            except ScheduleBusyError:
                # Another worker records it now, or an operator's session holds the row: looked
                # at again in a second. Not kept on time: were the lock to last, the ticks due
                # meanwhile are missed, and the catch-up policy decides, as in an outage.
                self._warnings.locked(schedule.name, now)
                refused = True
                break
            if recorded is None:
                refused = True
                if tick.skipped is None and tick.note is None:  # on time: it stays on time
                    earliest = self._refused.get(schedule.name, tick.at)
                    self._refused[schedule.name] = min(earliest, tick.at)
            else:
                waits = waits or recorded.status is TickStatus.WAITING
                if self._metrics is not None and self._metrics.recording():
                    # Missed: due while no worker ran (caught up, or skipped for it).
                    self._metrics.tick(schedule.name, recorded.status.value, missed)
                logger.info(
                    "schedule %r: tick %s %s%s", schedule.name, tick.at.isoformat(),
                    recorded.status.value,
                    "" if recorded.job_id is None else f" as job {recorded.job_id}",
                )  # fmt: skip
            recorded_until = max(recorded_until, tick.at)
        full = cut_short or len(planned) >= MAX_TICKS_PER_ROUND
        return _Recorded(recorded_until, waits, full, refused)

    async def _start_waiting(
        self, schedule: Schedule, row: StoredSchedule, definition_hash: str
    ) -> bool:
        """Enqueues the tick waiting on `schedule` if the job before it has finished; returns
        whether it did (False: it still waits)."""
        template = schedule.new_tick(definition_hash, row.defined_at, self._worker_id)
        try:
            started = await self._store.start_waiting_tick(template)
        except ScheduleBusyError:
            self._warnings.locked(schedule.name, self._clock())
            return False  # looked at again in a second
        if started is None:
            return False
        logger.info(
            "schedule %r: tick %s enqueued as job %s after waiting",
            schedule.name, started.at.isoformat(), started.job_id,
        )  # fmt: skip
        return True

    async def _prune(self, now: datetime) -> None:
        if self._pruned_at is not None and now - self._pruned_at < _PRUNE_EVERY:
            return
        self._pruned_at = now
        deleted = await self._store.prune_ticks(KEPT_TICKS)
        if deleted:
            logger.debug("schedules: deleted %d old tick(s)", deleted)
