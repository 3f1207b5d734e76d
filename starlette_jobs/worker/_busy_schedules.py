"""Schedules whose rows a tick found locked by another transaction (`ScheduleBusyError`): a
worker recording the same tick, which is over in milliseconds, or something that lasts (an
operator's session, a worker stopped in the middle of a tick until the server ends its
transaction). The ticker goes on with the other schedules and looks again in a second; this
tells the operator once such a lock has lasted."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

logger = logging.getLogger("starlette_jobs.worker")

BUSY_WARNING = timedelta(seconds=10)
"""How long a schedule's row may stay locked elsewhere before a warning."""


class BusySchedules:
    def __init__(self) -> None:
        self._since: dict[str, datetime] = {}  # found locked since, per schedule
        self._warned: set[str] = set()

    def found(self, schedule: str, now: datetime) -> None:
        """`schedule`'s row was found locked; warns once it has been for `BUSY_WARNING`."""
        since = self._since.setdefault(schedule, now)
        if now - since >= BUSY_WARNING and schedule not in self._warned:
            self._warned.add(schedule)
            logger.warning(
                "schedule %r: its row has been locked by another transaction for %.0f s (an "
                "operator's session, or a worker stopped in the middle of a tick): its ticks "
                "wait, and those missed meanwhile go by its catch-up policy",
                schedule,
                (now - since).total_seconds(),
            )

    def free(self, schedule: str) -> None:
        """A tick of `schedule` got its row."""
        self._since.pop(schedule, None)
        if schedule in self._warned:
            self._warned.discard(schedule)
            logger.info("schedule %r: its row is no longer locked; ticking again", schedule)
