"""`@periodic`: a schedule declared on a job, and the registry of the schedules this process
declares (what its workers write to the database at start, and tick).

A schedule is its definition: the cron expression, zone, job, arguments and policies, written as
JSON with a hash of it. A worker ticks a schedule only while the database holds the very
definition its own code declares, so a schedule changed or removed by newer code stops ticking in
its old form as soon as a newer worker has started (see `worker/_ticker.py`).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal, TypeVar

from ._cron import Cron
from ._errors import JobArgumentsError, ScheduleDefinitionError
from ._job import Job
from ._schedule_records import DeclaredSchedule, NewTick

CatchUp = Literal["none", "latest"] | timedelta
"""What a worker enqueues of the ticks missed while no worker ran: "none", the "latest" one,
or (a `timedelta`) every one within that long before now."""

Overlap = Literal["allow", "skip", "one_waiting"]
"""When a tick comes while the previous tick's job is pending or running: "allow" enqueues it
anyway, "skip" records it as skipped, "one_waiting" lets one tick wait for that job to finish
(and skips the ticks beyond it)."""

_OVERLAPS = ("allow", "skip", "one_waiting")
_NAME = re.compile(r"[A-Za-z0-9_.:<>-]{1,200}")  # a job's name may be a schedule's
_LONGEST_WINDOW = timedelta(days=366)

J = TypeVar("J", bound=Job[Any, Any])


@dataclass(frozen=True, slots=True, eq=False)
class Schedule:
    """One declared schedule of a job; see `periodic`."""

    name: str
    job: Job[Any, Any]
    cron: Cron
    payload: str
    """The arguments of every tick, validated, as the JSON text a job's row holds."""
    catch_up: CatchUp
    overlap: Overlap

    def definition(self) -> dict[str, Any]:
        """What is stored, and compared by its hash: everything that decides what a tick does."""
        catch_up = self.catch_up
        return {
            "job": self.job.name,
            "queue": self.job.queue,
            "cron": self.cron.expression,
            "timezone": self.cron.timezone,
            "arguments": json.loads(self.payload),
            "catch_up": catch_up.total_seconds() if isinstance(catch_up, timedelta) else catch_up,
            "overlap": self.overlap,
            "priority": self.job.priority,
            "max_attempts": self.job.retry.max_attempts,
        }

    def declared(self) -> DeclaredSchedule:
        text = json.dumps(self.definition(), sort_keys=True, separators=(",", ":"))
        digest = hashlib.sha256(text.encode()).hexdigest()
        return DeclaredSchedule(self.name, text, digest)

    def new_tick(
        self, definition_hash: str, at: datetime, worker_id: str, *, skipped: str | None = None,
        note: str | None = None,
    ) -> NewTick:  # fmt: skip
        return NewTick(
            schedule=self.name,
            definition_hash=definition_hash,
            at=at,
            overlap=self.overlap,
            skipped=skipped,
            note=note,
            job_name=self.job.name,
            queue=self.job.queue,
            payload=self.payload,
            priority=self.job.priority,
            max_attempts=self.job.retry.max_attempts,
            worker_id=worker_id,
        )


_registry: dict[str, Schedule] = {}


def registered_schedules() -> list[Schedule]:
    """Every schedule declared in this process, by name."""
    return [_registry[name] for name in sorted(_registry)]


def forget_schedule(name: str) -> None:
    """Removes a schedule from this process's registry (tests declare and forget theirs)."""
    _registry.pop(name, None)


def periodic(
    cron: str,
    *,
    timezone: str = "UTC",
    name: str | None = None,
    arguments: Mapping[str, Any] | None = None,
    catch_up: CatchUp = "latest",
    overlap: Overlap = "allow",
) -> Callable[[J], J]:
    """Enqueue a job on a schedule: put it above `@job`. Every worker process ticks it, and
    the database lets one of them enqueue each tick, exactly once (docs/schedules.md).

    Args:
        cron: 5 fields (minute hour day-of-month month day-of-week), or 6 with seconds first.
        timezone: the IANA zone the expression's wall clock is in; default "UTC".
        name: the schedule's name; default the job's name. A second schedule of one job needs
            a name of its own.
        arguments: the job's keyword arguments for every tick, validated now like an enqueue.
        catch_up: the ticks missed while no worker ran: "none", the "latest" one (default), or
            a `timedelta`: all of them within that long before the worker started.
        overlap: a tick whose previous tick's job is still pending or running: "allow" it
            (default), "skip" it, or "one_waiting": enqueue it once that job finishes,
            skipping further ticks meanwhile.

    Raises:
        ScheduleDefinitionError: a bad expression or zone, a policy out of its choices,
            arguments the job refuses, or a name another schedule has.

    Example:
        >>> @periodic("0 9 * * MON-FRI", timezone="Europe/Paris")
        ... @job(queue="reports")
        ... async def morning_report() -> None: ...
    """
    parsed = Cron(cron, timezone)
    _check_catch_up(catch_up)
    if overlap not in _OVERLAPS:
        raise ScheduleDefinitionError(
            f"overlap must be one of {', '.join(map(repr, _OVERLAPS))}, got {overlap!r}"
        )

    def declare(declared: J) -> J:
        if not isinstance(declared, Job):
            raise ScheduleDefinitionError(
                f"@periodic goes above @job (it schedules a job), not on {declared!r}"
            )
        schedule_name = declared.name if name is None else name
        if not isinstance(schedule_name, str) or not _NAME.fullmatch(schedule_name):
            raise ScheduleDefinitionError(
                f"invalid schedule name {schedule_name!r}: use 1 to 200 letters, digits or any "
                "of _ . : < > -"
            )
        try:
            payload = declared._serialize_arguments((), dict(arguments or {}))
        except JobArgumentsError as error:
            raise ScheduleDefinitionError(f"schedule {schedule_name!r}: {error}") from None
        schedule = Schedule(schedule_name, declared, parsed, payload, catch_up, overlap)
        _register(schedule)
        return declared

    return declare


def _check_catch_up(catch_up: object) -> None:
    if isinstance(catch_up, timedelta):
        if not timedelta(0) < catch_up <= _LONGEST_WINDOW:
            raise ScheduleDefinitionError(
                f"a catch_up window must be positive and at most 366 days, got {catch_up}"
            )
    elif catch_up not in ("none", "latest"):
        raise ScheduleDefinitionError(
            f"catch_up must be 'none', 'latest' or a timedelta, got {catch_up!r}"
        )


def _register(schedule: Schedule) -> None:
    existing = _registry.get(schedule.name)
    if existing is not None and existing.job is schedule.job:
        raise ScheduleDefinitionError(
            f"job {schedule.job.name!r} has two schedules named {schedule.name!r}: give each "
            "@periodic of one job its own name="
        )
    if existing is not None and _origin(existing) != _origin(schedule):
        raise ScheduleDefinitionError(
            f"two schedules are named {schedule.name!r} (of job {existing.job.name!r} and of "
            f"job {schedule.job.name!r}); give each @periodic of one job its own name="
        )
    # The same declaration again (a module reloaded, a test redefining a job) replaces it.
    _registry[schedule.name] = schedule


def _origin(schedule: Schedule) -> tuple[str, str]:
    func = schedule.job.func
    return schedule.job.name, f"{func.__module__}.{getattr(func, '__qualname__', repr(func))}"
