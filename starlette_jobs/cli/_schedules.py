"""`starlette-jobs schedules`: the schedules the workers declared, each with its next and last
tick, as a table for people or JSON for scripts."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from .._jobs import Jobs
from .._schedule_records import ScheduleRecord, TickRecord
from ._output import print_table

_COLUMNS = ("NAME", "JOB", "CRON", "ZONE", "NEXT TICK", "LAST TICK")


async def print_schedules(jobs: Jobs, *, as_json: bool) -> int:
    async with jobs:
        schedules = await jobs.schedules()
    if as_json:
        for schedule in schedules:
            print(json.dumps(_as_dict(schedule)))
        return 0
    if not schedules:
        print("no schedules: a worker writes those its code declares (@periodic) as it starts")
        return 0
    print_table(_COLUMNS, map(_row, schedules))
    return 0


def _row(schedule: ScheduleRecord) -> tuple[str, ...]:
    zone = ZoneInfo(schedule.timezone)
    return (
        schedule.name,
        schedule.job,
        schedule.cron,
        schedule.timezone,
        "never" if schedule.next_tick is None else _local(schedule.next_tick, zone),
        _last(schedule.last_tick, zone),
    )


def _local(at: datetime, zone: ZoneInfo) -> str:
    """The instant on the schedule's own wall clock, with its offset."""
    return at.astimezone(zone).isoformat(sep=" ")


def _last(tick: TickRecord | None, zone: ZoneInfo) -> str:
    if tick is None:
        return "-"
    text = f"{_local(tick.at, zone)} {tick.status.value}"
    if tick.job_id is not None:
        text += f" (job {tick.job_id})"
    if tick.reason is not None and tick.job_id is None:
        text += f": {tick.reason}"
    return text


def _as_dict(schedule: ScheduleRecord) -> dict[str, Any]:
    last = schedule.last_tick
    catch_up = schedule.catch_up
    return {
        "name": schedule.name,
        "job": schedule.job,
        "queue": schedule.queue,
        "cron": schedule.cron,
        "timezone": schedule.timezone,
        "arguments": schedule.arguments,
        "catch_up": catch_up if isinstance(catch_up, str) else catch_up.total_seconds(),
        "overlap": schedule.overlap,
        "defined_at": schedule.defined_at.isoformat(),
        "next_tick": None if schedule.next_tick is None else schedule.next_tick.isoformat(),
        "last_tick": None
        if last is None
        else {
            "at": last.at.isoformat(),
            "status": last.status.value,
            "reason": last.reason,
            "job_id": last.job_id,
        },
    }
