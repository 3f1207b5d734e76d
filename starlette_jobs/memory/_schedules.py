"""The in-memory store's part of periodic jobs: the schedules the workers declare and their
ticks, as `postgres/_schedules.py` and its statements keep them. Each method runs to its end
without awaiting, so several `Jobs` on one store tick exactly once, as the primary key and the
schedule's row lock make it on PostgreSQL. `_store.MemoryStore` takes them in."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime

from .._records import NewJobs
from .._schedule_records import (
    CLOCK_SET_BACK,
    EARLY_TICK_SLACK,
    DeclaredSchedule,
    NewTick,
    StoredSchedule,
    TickRecord,
    TickStatus,
)
from ._rows import ScheduleRow
from ._tables import LIVE, MemoryTables, utc_now


class MemorySchedules(MemoryTables):
    @property
    def _schedules(self) -> dict[str, ScheduleRow]:
        return self.data.schedules

    @property
    def _ticks(self) -> dict[tuple[str, datetime], TickRecord]:
        return self.data.ticks

    async def declare_schedules(self, schedules: Sequence[DeclaredSchedule]) -> None:
        now = utc_now()
        names = {schedule.name for schedule in schedules}
        for name in [name for name in self._schedules if name not in names]:
            del self._schedules[name]
            self._forget_ticks(functools.partial(_of_schedule, name))
        for schedule in schedules:
            row = self._schedules.get(schedule.name)
            if row is None:
                self._schedules[schedule.name] = ScheduleRow(schedule, now)
            elif row.declared.definition_hash != schedule.definition_hash:
                row.declared, row.defined_at, row.waiting_tick_at = schedule, now, None
                for key, tick in list(self._ticks.items()):
                    if key[0] == schedule.name and tick.status is TickStatus.WAITING:
                        reason = "the schedule changed while this tick waited"
                        self._ticks[key] = replace(tick, status=TickStatus.SKIPPED, reason=reason)

    async def list_schedules(self) -> list[StoredSchedule]:
        return [
            StoredSchedule(
                name=name,
                definition=json.loads(row.declared.definition),
                definition_hash=row.declared.definition_hash,
                defined_at=row.defined_at,
                last_tick_at=row.last_tick_at,
                waiting_tick_at=row.waiting_tick_at,
                last_tick=None
                if row.last_tick_at is None
                else self._ticks.get((name, row.last_tick_at)),
            )
            for name, row in sorted(self._schedules.items())
        ]

    async def record_tick(self, tick: NewTick) -> TickRecord | None:
        row = self._current(tick)
        if row is None or (tick.schedule, tick.at) in self._ticks:
            return None
        clock_set_back = row.last_tick_at is not None and (
            row.last_tick_at > utc_now() + CLOCK_SET_BACK
        )
        if row.last_tick_at is not None and tick.at <= row.last_tick_at and not clock_set_back:
            return None  # decided already, though its record may be pruned
        if tick.at > utc_now() + EARLY_TICK_SLACK:
            return None  # not due yet by the store's clock: see `EARLY_TICK_SLACK`
        previous = self._live_job(row)
        status, reason = TickStatus.ENQUEUED, tick.note
        if tick.skipped is not None:
            status, reason = TickStatus.SKIPPED, tick.skipped
        elif tick.overlap == "one_waiting" and row.waiting_tick_at is not None:
            # The waiting tick keeps its turn, even once the job it waits for has ended.
            status = TickStatus.SKIPPED
            behind = "" if previous is None else f", behind job {previous[0]}"
            reason = f"overlap: a tick waits already{behind}"
        elif tick.overlap != "allow" and previous is not None:
            job_id, job_status = previous
            if tick.overlap == "one_waiting":
                status = TickStatus.WAITING
                reason = f"waits for job {job_id} of an earlier tick, still {job_status}"
            else:
                status = TickStatus.SKIPPED
                reason = f"overlap: job {job_id} of an earlier tick is still {job_status}"
        new_job = self._enqueue(tick, tick.at) if status is TickStatus.ENQUEUED else None
        recorded = TickRecord(
            tick.schedule, tick.at, status, reason, new_job, utc_now(), tick.worker_id
        )
        self._ticks[tick.schedule, tick.at] = recorded
        row.last_tick_at = tick.at
        if new_job is not None:
            row.last_job_id = new_job
        if status is TickStatus.WAITING:
            row.waiting_tick_at = tick.at
        return recorded

    async def start_waiting_tick(self, tick: NewTick) -> TickRecord | None:
        row = self._current(tick)
        if row is None or row.waiting_tick_at is None or self._live_job(row) is not None:
            return None
        key = (tick.schedule, row.waiting_tick_at)
        waiting = self._ticks.get(key)
        if waiting is None:
            return None
        job_id = self._enqueue(tick, row.waiting_tick_at)
        reason = "waited for the job of an earlier tick to finish"
        started = replace(waiting, status=TickStatus.ENQUEUED, job_id=job_id, reason=reason)
        self._ticks[key] = started
        row.waiting_tick_at, row.last_job_id = None, job_id
        return started

    async def schedule_ticks(self, schedule: str, limit: int) -> list[TickRecord]:
        ticks = [tick for (name, _), tick in self._ticks.items() if name == schedule]
        return sorted(ticks, key=lambda tick: tick.at, reverse=True)[:limit]

    async def prune_ticks(self, keep: int) -> int:
        kept: set[tuple[str, datetime]] = set()
        for name in {name for name, _ in self._ticks}:
            kept.update((name, tick.at) for tick in await self.schedule_ticks(name, keep))
        return self._forget_ticks(
            lambda key, tick: key not in kept and tick.status is not TickStatus.WAITING
        )

    def _forget_ticks(self, forget: Callable[[tuple[str, datetime], TickRecord], bool]) -> int:
        doomed = [key for key, tick in self._ticks.items() if forget(key, tick)]
        for key in doomed:
            del self._ticks[key]
        return len(doomed)

    def _current(self, tick: NewTick) -> ScheduleRow | None:
        row = self._schedules.get(tick.schedule)
        if row is None or row.declared.definition_hash != tick.definition_hash:
            return None
        return row

    def _live_job(self, row: ScheduleRow) -> tuple[int, str] | None:
        job = None if row.last_job_id is None else self._rows.get(row.last_job_id)
        if job is None or job.status not in LIVE:
            return None
        return job.id, job.status.value

    def _enqueue(self, tick: NewTick, at: datetime) -> int:
        new = NewJobs(
            name=tick.job_name, queue=tick.queue, payloads=[tick.payload],
            priority=tick.priority, delay=None, run_at=None, max_attempts=tick.max_attempts,
            trace_context=None, unique_key=None, notify=True,
        )  # fmt: skip
        (job_id,) = self._insert(new, [next(self._ids)])
        self._rows[job_id].scheduled_for = at
        return job_id


def _of_schedule(name: str, key: tuple[str, datetime], _tick: TickRecord) -> bool:
    return key[0] == name
