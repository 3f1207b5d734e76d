"""`ScheduleQueries`: what users ask of the schedules (`jobs.schedules()`, `jobs.ticks(name)`),
over whatever `Store` the `Jobs` it belongs to has started."""

from __future__ import annotations

import builtins
from datetime import UTC, datetime, timedelta

from ._cron import Cron
from ._errors import unavailable_as_error
from ._schedule_records import ScheduleRecord, StoredSchedule, TickRecord
from .store._protocol import Store


class ScheduleQueries:
    """The part of `Jobs` that looks at schedules; `Jobs` supplies `store`."""

    @property
    def _ready_store(self) -> Store:
        raise NotImplementedError

    async def schedules(self) -> builtins.list[ScheduleRecord]:
        """The schedules the workers declared (`@periodic`), by name, each with its next and
        last tick.

        Example:
            >>> for schedule in await jobs.schedules():
            ...     print(schedule.name, schedule.next_tick, schedule.last_tick)
        """
        with unavailable_as_error("list the schedules"):
            stored = await self._ready_store.list_schedules()
        now = datetime.now(UTC)
        return [_record(row, now) for row in stored]

    async def ticks(self, schedule: str, *, limit: int = 20) -> builtins.list[TickRecord]:
        """The schedule's latest ticks, latest first: the job each enqueued, or why it was
        skipped. The workers keep the latest 100 of each schedule."""
        if type(limit) is not int or limit < 1:
            raise ValueError(f"limit must be a positive integer, got {limit!r}")
        with unavailable_as_error(f"list the ticks of schedule {schedule!r}"):
            return await self._ready_store.schedule_ticks(schedule, limit)


def _record(row: StoredSchedule, now: datetime) -> ScheduleRecord:
    definition = row.definition
    catch_up = definition["catch_up"]
    recorded_until = max(row.last_tick_at or row.defined_at, row.defined_at)
    return ScheduleRecord(
        name=row.name,
        job=definition["job"],
        queue=definition["queue"],
        cron=definition["cron"],
        timezone=definition["timezone"],
        arguments=definition["arguments"],
        catch_up=timedelta(seconds=catch_up) if isinstance(catch_up, int | float) else catch_up,
        overlap=definition["overlap"],
        defined_at=row.defined_at,
        next_tick=Cron(definition["cron"], definition["timezone"]).next_after(
            max(recorded_until, now)
        ),
        last_tick=row.last_tick,
    )
