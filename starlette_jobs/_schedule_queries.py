"""`ScheduleQueries`: what users ask of the schedules (`jobs.schedules()`, `jobs.ticks(name)`),
over whatever `Store` the `Jobs` it belongs to has started."""

from __future__ import annotations

import builtins
import logging
from datetime import UTC, datetime, timedelta

from ._cron import Cron
from ._errors import ScheduleDefinitionError, unavailable_as_error
from ._schedule_records import ScheduleRecord, StoredSchedule, TickRecord
from .store._protocol import Store

logger = logging.getLogger("starlette_jobs")


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
    """The record of a schedule's row. A row this process cannot read whole (another version
    wrote it, or an operator edited it: a zone this machine's tzdata lacks, a field missing)
    is listed with what it can read and no next tick, and why logged once, not raised: one
    such row would hide every other schedule (and the dashboard's page, and the CLI's table)."""
    definition = row.definition if isinstance(row.definition, dict) else {}
    text = {
        key: value if isinstance(value := definition.get(key), str) else ""
        for key in ("job", "queue", "cron", "timezone", "overlap")
    }
    catch_up = _catch_up(definition.get("catch_up"))
    arguments = definition.get("arguments")
    recorded_until = max(row.last_tick_at or row.defined_at, row.defined_at)
    try:
        next_tick = Cron(text["cron"], text["timezone"]).next_after(max(recorded_until, now))
    except ScheduleDefinitionError as error:
        next_tick = None
        _tell_unreadable(row, str(error))
    else:
        missing = [key for key in _FIELDS if key not in definition]
        if missing:
            _tell_unreadable(row, f"no {', '.join(missing)} in its definition")
        elif catch_up == "":
            _tell_unreadable(row, "its catch_up is neither a policy nor a window")
    return ScheduleRecord(
        name=row.name,
        job=text["job"],
        queue=text["queue"],
        cron=text["cron"],
        timezone=text["timezone"],
        arguments=arguments if isinstance(arguments, dict) else {},
        catch_up=catch_up,
        overlap=text["overlap"],
        defined_at=row.defined_at,
        next_tick=next_tick,
        last_tick=row.last_tick,
    )


def _catch_up(stored: object) -> str | timedelta:
    """A stored catch-up policy ("none", "latest") or window (seconds); "" for what is neither."""
    if isinstance(stored, str):
        return stored
    if isinstance(stored, int | float) and not isinstance(stored, bool):
        try:
            return timedelta(seconds=stored)
        except (OverflowError, ValueError):  # past timedelta's range, or NaN
            return ""
    return ""


_FIELDS = ("job", "queue", "cron", "timezone", "arguments", "catch_up", "overlap")
_told_unreadable: set[tuple[str, str]] = set()  # (name, definition hash): each logged once


def _tell_unreadable(row: StoredSchedule, why: str) -> None:
    if (row.name, row.definition_hash) in _told_unreadable:
        return
    _told_unreadable.add((row.name, row.definition_hash))
    logger.warning(
        "schedule %r: this process cannot read its row in starlette_jobs_schedules whole (%s):"
        " it is listed with what could be read, without its next tick",
        row.name, why,
    )  # fmt: skip
