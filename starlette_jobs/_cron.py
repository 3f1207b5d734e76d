"""When a schedule ticks: a cron expression read by cronsim in a time zone (`Cron`), and which
ticks a round of the ticker records, given when ticks were last recorded and its catch-up
policy (`plan_ticks`). Pure: every function takes the clock as an argument.

Instants are compared in UTC only: two datetimes of one `tzinfo` compare by their wall clocks,
fold ignored, which would take 01:30 of a repeated hour for the same instant twice.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

from ._errors import ScheduleDefinitionError

# The most ticks one round computes for one schedule: a bound on the work after a long stop.
MAX_TICKS_PER_ROUND = 1000
# A daylight-saving shift is at most this long (Lord Howe's is 30 minutes, most an hour).
_LONGEST_SHIFT = timedelta(hours=3)
# How far apart a zone's offset is looked at when searching for its next change: less than the
# shortest time between two changes of any zone (a few weeks at the least).
_OFFSET_LOOK = timedelta(days=7)
# Ticks are looked for this far at most: "none in 50 years", as cronsim says.
_HORIZON = timedelta(days=366 * 50)
_SECOND = timedelta(seconds=1)
_MICROSECOND = timedelta(microseconds=1)


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
        # cronsim walks a 5-field expression with a fixed minute and hour (a time of day) on
        # the wall clock, Debian's way; any other on the zone's real clock, which it does by
        # converting each second stepped to UTC and back. That walk can loop for ever over a
        # clock change that is not on the hour (Pacific/Chatham's, at 03:45), so it is walked
        # here one stretch of constant UTC offset at a time (`_real_time`): the same ticks, in
        # a zone with no changes.
        walked = self._walked.split()
        self._wall_clock = (
            len(walked) == 5 and not walked[0].startswith("*") and not walked[1].startswith("*")
        )

    def __repr__(self) -> str:
        return f"Cron({self.expression!r}, {self.timezone!r})"

    def _forwards(self, after: datetime) -> Iterator[datetime]:
        """The ticks after `after` as cronsim walks them (UTC; in wall-clock order)."""
        start = after - self._offset
        if self._wall_clock:
            ticks: Iterator[datetime] = CronSim(self._walked, start.astimezone(self.zone))
        else:
            ticks = self._real_time(start, reverse=False)
        for tick in ticks:
            yield tick.astimezone(UTC) + self._offset

    def _backwards(self, before: datetime) -> Iterator[datetime]:
        """The ticks before `before`, latest first, as cronsim walks them back (UTC)."""
        start = before - self._offset
        if self._wall_clock:
            ticks: Iterator[datetime] = CronSim(
                self._walked, start.astimezone(self.zone), reverse=True
            )
        else:
            ticks = self._real_time(start, reverse=True)
        for tick in ticks:
            yield tick.astimezone(UTC) + self._offset

    def _real_time(self, start: datetime, *, reverse: bool) -> Iterator[datetime]:
        """The ticks after `start` (before it, with `reverse`), walked one stretch of constant
        UTC offset at a time, each in a fixed-offset zone: cronsim's walk then has no clock
        change to cross. A stretch ends at the zone's next change of offset (starts at its
        last one, backwards); the walk of the next goes on from there."""
        walk_from = start.astimezone(UTC)
        # The whole second the walk starts with: cronsim's first step (a second) goes from it.
        here = (walk_from - _MICROSECOND if reverse else walk_from).replace(microsecond=0)
        if reverse:
            limit = here - _HORIZON
            while True:
                since = self._stretch_start(here, limit)
                zone = self._fixed(here)
                for tick in CronSim(self._walked, walk_from.astimezone(zone), reverse=True):
                    if tick < since:
                        break
                    yield tick
                if since <= limit:
                    return
                walk_from, here = since, since - _SECOND
        else:
            limit = here + _HORIZON
            while True:
                until = self._stretch_end(here, limit)
                for tick in CronSim(self._walked, walk_from.astimezone(self._fixed(here))):
                    if tick >= until:
                        break
                    yield tick
                if until >= limit:
                    return
                # From a second before the change: cronsim's first step lands on it.
                walk_from, here = until - _SECOND, until

    def _fixed(self, at: datetime) -> timezone:
        """A zone with no changes, at the zone's UTC offset at `at`."""
        offset = at.astimezone(self.zone).utcoffset()
        assert offset is not None
        return timezone(offset)

    def _stretch_end(self, at: datetime, limit: datetime) -> datetime:
        """The first second after `at` (a whole second) at which the zone's UTC offset is no
        longer what it is at `at`; `limit` if there is none before it."""
        same = self._fixed(at)
        near = at
        while True:
            far = min(near + _OFFSET_LOOK, limit)
            if self._fixed(far) != same:
                break
            if far == limit:
                return limit
            near = far
        return self._halved(near, far, same)

    def _stretch_start(self, at: datetime, limit: datetime) -> datetime:
        """The first second of the stretch of the zone's UTC offset at `at` (a whole second),
        looking back no further than `limit`."""
        same = self._fixed(at)
        near = at
        while True:
            far = max(near - _OFFSET_LOOK, limit)
            if self._fixed(far) != same:
                break
            if far == limit:
                return limit
            near = far
        return self._halved(far, near, same, found_from_above=True)

    def _halved(
        self, low: datetime, high: datetime, same: timezone, *, found_from_above: bool = False
    ) -> datetime:
        """Of two whole seconds, one at the offset `same` and one not, the first second of the
        change between them (the first at `same`, when `high` is the one at it)."""
        while high - low > _SECOND:
            middle = low + timedelta(seconds=(high - low) // _SECOND // 2)
            if (self._fixed(middle) == same) != found_from_above:
                low = middle
            else:
                high = middle
        return high

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
