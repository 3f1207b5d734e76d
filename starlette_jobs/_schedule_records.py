"""The records of periodic jobs: what users get back (`ScheduleRecord`, the `TickRecord`s of a
schedule's history, `TickStatus`), and what the library hands the store (`DeclaredSchedule` to
write, `StoredSchedule` read back, `NewTick` to record)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

EARLY_TICK_SLACK = timedelta(seconds=1)
"""How early, by the store's clock, a tick may be recorded: a worker whose clock runs faster
than that records nothing before the tick is due, and leaves no tick out for the others."""


CLOCK_SET_BACK = timedelta(minutes=1)
"""A schedule's latest tick (or its definition) further ahead of the clock than this was
recorded while the clocks ran ahead, and they were set back since: its ticks go on from the
clock's time, not from a tick that has not come yet."""


class ScheduleBusyError(Exception):
    """A tick found its schedule's row locked by another transaction (another worker recording
    a tick of it, an operator's session): nothing recorded. The ticker looks again shortly,
    and goes on with the other schedules meanwhile."""


class TickStatus(StrEnum):
    """What became of a schedule's tick, as its history records it."""

    ENQUEUED = "enqueued"
    """Its job was enqueued (`TickRecord.job_id`)."""
    SKIPPED = "skipped"
    """No job: the overlap policy, or a tick missed while no worker ran (`reason` says)."""
    WAITING = "waiting"
    """`overlap="one_waiting"`: enqueued once the previous tick's job has finished."""


@dataclass(frozen=True, slots=True)
class TickRecord:
    """One tick of a schedule, as `jobs.ticks(name)` lists it."""

    schedule: str
    at: datetime
    """The instant the tick was due (what the job reads as `current_job().scheduled_for`)."""
    status: TickStatus
    reason: str | None
    """Why it was skipped, or how it was enqueued when it was not on time (caught up)."""
    job_id: int | None
    recorded_at: datetime
    worker_id: str | None = None
    """The worker whose process recorded the tick (every worker ticks; one wins each tick)."""


@dataclass(frozen=True, slots=True)
class ScheduleRecord:
    """A declared schedule as the database holds it, with its next and last tick
    (`jobs.schedules()`)."""

    name: str
    job: str
    """The name of the job each tick enqueues."""
    queue: str
    cron: str
    timezone: str
    arguments: dict[str, Any]
    catch_up: str | timedelta
    """"none", "latest", or a window: every missed tick within it."""
    overlap: str
    """"allow", "skip" or "one_waiting"."""
    defined_at: datetime
    """When this definition was first written (a changed one starts afresh)."""
    next_tick: datetime | None
    """When it ticks next (None: its expression never matches again, or this process cannot
    read its row whole, written by another version or edited by hand: a warning says why)."""
    last_tick: TickRecord | None


@dataclass(frozen=True, slots=True)
class DeclaredSchedule:
    """A schedule's definition as the store keeps it: `definition` is JSON text, and
    `definition_hash` tells one definition from another."""

    name: str
    definition: str
    definition_hash: str


@dataclass(frozen=True, slots=True)
class StoredSchedule:
    """A schedule's row: its definition and how far its ticks were recorded."""

    name: str
    definition: dict[str, Any]
    definition_hash: str
    defined_at: datetime
    last_tick_at: datetime | None
    """The latest tick recorded (enqueued, skipped or waiting)."""
    waiting_tick_at: datetime | None
    """A tick waiting for the previous one's job to finish (`overlap="one_waiting"`)."""
    last_tick: TickRecord | None


@dataclass(frozen=True, slots=True, kw_only=True)
class NewTick:
    """A tick to record (`Store.record_tick`), and the job it enqueues."""

    schedule: str
    definition_hash: str
    """Recorded only while the stored definition has this hash."""
    at: datetime
    overlap: str
    skipped: str | None
    """Record it as skipped for this reason, enqueueing nothing."""
    note: str | None
    job_name: str
    queue: str
    payload: str
    priority: int
    max_attempts: int
    worker_id: str
