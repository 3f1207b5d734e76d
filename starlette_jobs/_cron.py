"""When a schedule ticks: a cron expression read by cronsim in a time zone (`Cron`), and which
ticks a round of the ticker records, given when ticks were last recorded and its catch-up
policy (`plan_ticks`). Pure: every function takes the clock as an argument.

Instants are compared in UTC only: two datetimes of one `tzinfo` compare by their wall clocks,
fold ignored, which would take 01:30 of a repeated hour for the same instant twice.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

from ._errors import ScheduleDefinitionError

# The most ticks one round computes for one schedule: a bound on the work after a long stop.
MAX_TICKS_PER_ROUND = 1000
# A daylight-saving shift is at most this long (Lord Howe's is 30 minutes, most an hour).
_LONGEST_SHIFT = timedelta(hours=3)


class Cron:
    """A cron expression (5 fields, or 6 with seconds first) in an IANA time zone, read as
    Debian's cron reads it: a tick at a wall-clock time that a spring-forward skips runs at the
    first minute after the gap, and one in an hour that a fall-back repeats runs once."""

    def __init__(self, expression: str, timezone: str) -> None:
        if not isinstance(expression, str):
            raise ScheduleDefinitionError(f"cron expression must be text, got {expression!r}")
        try:
            self.zone = ZoneInfo(timezone)
        except (ZoneInfoNotFoundError, ValueError, TypeError):
            raise ScheduleDefinitionError(
                f"unknown time zone {timezone!r}: use an IANA name such as 'Europe/Paris' or 'UTC'"
            ) from None
        try:
            CronSim(expression, datetime(2000, 1, 1, tzinfo=self.zone))
        except CronSimError as error:
            raise ScheduleDefinitionError(
                f"bad cron expression {expression!r}: {error} (5 fields: minute hour "
                "day-of-month month day-of-week; or 6, with seconds first)"
            ) from None
        self.expression = expression
        self.timezone = timezone
        # cronsim reads the daylight-saving rules into 5-field expressions only. A 6-field one
        # whose seconds are one number ("0 30 2 * * *") is its 5 fields, that many seconds
        # later: walked so, a tick at a fixed time of day follows the same rules.
        fields = expression.split()
        if len(fields) == 6 and fields[0].isdigit():
            self._walked, self._offset = " ".join(fields[1:]), timedelta(seconds=int(fields[0]))
        else:
            self._walked, self._offset = expression, timedelta(0)

    def __repr__(self) -> str:
        return f"Cron({self.expression!r}, {self.timezone!r})"

    def _forwards(self, after: datetime) -> Iterator[datetime]:
        """The ticks after `after` as cronsim walks them (UTC; in wall-clock order)."""
        for tick in CronSim(self._walked, (after - self._offset).astimezone(self.zone)):
            yield tick.astimezone(UTC) + self._offset

    def _backwards(self, before: datetime) -> Iterator[datetime]:
        """The ticks before `before`, latest first, as cronsim walks them back (UTC)."""
        start = (before - self._offset).astimezone(self.zone)
        for tick in CronSim(self._walked, start, reverse=True):
            yield tick.astimezone(UTC) + self._offset

    def next_after(self, at: datetime) -> datetime | None:
        """The first tick strictly after `at` (UTC), or None if there is none in 50 years."""
        at = at.astimezone(UTC)
        for instant in self._forwards(at):
            if instant > at:  # a wall clock iterated past a fold can land before `at`
                return instant
        return None

    def between(self, after: datetime, until: datetime, limit: int) -> list[datetime]:
        """The ticks in (`after`, `until`], oldest first, at most `limit` of the oldest."""
        after, until = after.astimezone(UTC), until.astimezone(UTC)
        ticks: list[datetime] = []
        if until <= after:
            return ticks
        for instant in self._forwards(after):
            if instant > until or len(ticks) >= limit:
                break
            if instant > after and (not ticks or instant > ticks[-1]):
                ticks.append(instant)
        return ticks

    def latest_until(self, until: datetime) -> datetime | None:
        """The last tick at or before `until`, or None if there is none in 50 years."""
        until = until.astimezone(UTC)
        start = until.replace(microsecond=0) + timedelta(seconds=1)
        found: datetime | None = None
        # Backwards from the next second: cronsim's first step back is one second.
        for instant in self._backwards(start):
            if instant <= until:
                found = instant
                break
        if self._near_shift(until):
            # Backwards on a wall clock that repeated an hour can jump over a tick that came
            # before `until` in real time: look forwards over the last hours instead.
            recent = self.between(until - _LONGEST_SHIFT, until, MAX_TICKS_PER_ROUND * 20)
            if recent and (found is None or recent[-1] > found):
                found = recent[-1]
        return found

    def _near_shift(self, at: datetime) -> bool:
        before = (at - _LONGEST_SHIFT).astimezone(self.zone).utcoffset()
        return before != at.astimezone(self.zone).utcoffset()


@dataclass(frozen=True, slots=True)
class PlannedTick:
    """A tick a round records: enqueued with `note` as its reason, or, with `skipped`, recorded
    as skipped for that reason and not enqueued."""

    at: datetime
    skipped: str | None = None
    note: str | None = None


def plan_ticks(
    cron: Cron,
    catch_up: str | timedelta,
    recorded_until: datetime,
    on_time_since: datetime,
    now: datetime,
) -> list[PlannedTick]:
    """The ticks in (`recorded_until`, `now`] to record, oldest first.

    A tick after `on_time_since` is on time (this ticker was running then) and is enqueued. One
    before it was missed while no worker ran: `catch_up` decides. "none" records the latest of
    them as skipped; "latest" enqueues the latest of them; a `timedelta` enqueues those within
    that long before `now`.
    """
    missed_until = min(on_time_since, now)
    planned: list[PlannedTick] = []
    if missed_until > recorded_until:
        if isinstance(catch_up, timedelta):
            since = max(recorded_until, now - catch_up)
            caught_up = cron.between(since, missed_until, MAX_TICKS_PER_ROUND)
            for at in caught_up:
                planned.append(PlannedTick(at, note="caught up: missed while no worker ran"))
            if len(caught_up) == MAX_TICKS_PER_ROUND:
                # More missed than a round records: the next round goes on from the last of
                # these. Recording the ticks due now would move the schedule past the rest.
                return planned
        else:
            latest = cron.latest_until(missed_until)
            if latest is not None and latest > recorded_until.astimezone(UTC):
                if catch_up == "none":
                    reason = "missed while no worker ran (catch_up='none')"
                    planned.append(PlannedTick(latest, skipped=reason))
                else:
                    note = "caught up: the latest of the ticks missed while no worker ran"
                    planned.append(PlannedTick(latest, note=note))
    since = max(recorded_until, missed_until)
    planned.extend(PlannedTick(at) for at in cron.between(since, now, MAX_TICKS_PER_ROUND))
    return planned
