"""What a worker's ticker tells the operator about a schedule it does not tick when it should:
its row locked by another transaction (`ScheduleBusyError`: a worker recording the same tick,
over in milliseconds, or something that lasts: an operator's session, a worker stopped in the
middle of a tick until the server ends its transaction); its definition held by other code
that a live worker runs (removed, or defined otherwise); its latest tick ahead of the clock
(the clocks ran ahead, and were set back). Each is said once, and its end too."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

logger = logging.getLogger("starlette_jobs.worker")

BUSY_WARNING = timedelta(seconds=10)
"""How long a schedule's row may stay locked elsewhere before a warning."""


class ScheduleWarnings:
    def __init__(self) -> None:
        # Since when each schedule's row has been found locked, round after round; those
        # found so in the round in progress.
        self._locked_since: dict[str, datetime] = {}
        self._locked_now: set[str] = set()
        self._locked_told: set[str] = set()
        self._held_elsewhere: set[str] = set()
        self._ahead: set[str] = set()

    def round_begins(self) -> None:
        self._locked_now = set()

    def round_ended(self) -> None:
        """A schedule whose row this round did not find locked is not: another worker's tick
        held it a moment (a race lost, the next round finds the tick recorded), or the lock
        that lasted is gone."""
        for schedule in list(self._locked_since):
            if schedule not in self._locked_now:
                self._unlocked(schedule)

    def locked(self, schedule: str, now: datetime) -> None:
        """`schedule`'s row was found locked; warns once it has been so, round after round,
        for `BUSY_WARNING`."""
        self._locked_now.add(schedule)
        since = self._locked_since.setdefault(schedule, now)
        if now - since >= BUSY_WARNING and schedule not in self._locked_told:
            self._locked_told.add(schedule)
            logger.warning(
                "schedule %r: its row has been locked by another transaction for %.0f s (an "
                "operator's session, or a worker stopped in the middle of a tick): its ticks "
                "wait, and those missed meanwhile go by its catch-up policy",
                schedule,
                (now - since).total_seconds(),
            )

    def _unlocked(self, schedule: str) -> None:
        self._locked_since.pop(schedule, None)
        if schedule in self._locked_told:
            self._locked_told.discard(schedule)
            logger.info("schedule %r: its row is no longer locked; ticking again", schedule)

    def held_elsewhere(self, schedule: str, removed: bool) -> None:
        """`schedule` is not stored as this code declares it, and a live worker's code holds
        what is stored: this worker does not tick it while that worker lives."""
        if schedule not in self._held_elsewhere:
            self._held_elsewhere.add(schedule)
            logger.warning(
                "schedule %r is %s in the database by the code of another live worker: this "
                "worker does not tick it while that code runs (during a deploy, until the old "
                "workers stop). If both versions are meant to run, every worker's code must "
                "declare the same schedules (docs/schedules.md)",
                schedule,
                "removed" if removed else "defined otherwise",
            )

    def ours(self, schedule: str) -> None:
        """`schedule` is stored as this code declares it."""
        if schedule in self._held_elsewhere:
            self._held_elsewhere.discard(schedule)
            logger.info("schedule %r: stored as this worker's code declares it again", schedule)

    def clock_right(self, schedule: str) -> None:
        """`schedule`'s latest tick is not ahead of the clock (any more)."""
        self._ahead.discard(schedule)

    def ahead_of_the_clock(self, schedule: str, latest: datetime, now: datetime) -> None:
        """`schedule`'s latest tick, or its definition, is at `latest`, well after `now`."""
        if schedule not in self._ahead:
            self._ahead.add(schedule)
            logger.warning(
                "schedule %r: its latest tick (or definition) is at %s, %.0f s ahead of this "
                "worker's clock: the clocks ran ahead and were set back. Its ticks go on from "
                "now",
                schedule,
                latest.isoformat(),
                (latest - now).total_seconds(),
            )
