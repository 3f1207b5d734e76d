"""The PostgreSQL store's part of periodic jobs: the schedules the workers declare and their
ticks (the `Store` protocol's "periodic jobs" methods), as the named queries of
sql/queries.sql. `_store.PostgresStore` takes them in."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from .._schedule_records import (
    DeclaredSchedule,
    NewTick,
    ScheduleBusyError,
    StoredSchedule,
    TickRecord,
    TickStatus,
)
from ._connected import ConnectedStore
from ._driver_errors import LockNotAvailableError, raise_as_store_error


class ScheduleStatements(ConnectedStore):
    async def declare_schedules(self, schedules: Sequence[DeclaredSchedule]) -> None:
        ordered = sorted(schedules, key=lambda schedule: schedule.name)
        await self._write(
            "execute",
            self._q["declare_schedules"],
            [s.name for s in ordered],
            [s.definition for s in ordered],
            [s.definition_hash for s in ordered],
        )

    async def list_schedules(self) -> list[StoredSchedule]:
        rows = await self._read("fetch", self._q["list_schedules"])
        return [
            StoredSchedule(
                name=row["name"],
                definition=json.loads(row["definition"]),
                definition_hash=row["definition_hash"],
                defined_at=row["defined_at"],
                last_tick_at=row["last_tick_at"],
                waiting_tick_at=row["waiting_tick_at"],
                last_tick=None if row["tick_at"] is None else _tick(row),
            )
            for row in rows
        ]

    async def record_tick(self, tick: NewTick) -> TickRecord | None:
        return await self._locked_tick(
            tick,
            self._q["record_tick"],
            tick.schedule, tick.at, tick.overlap, tick.skipped, tick.note, tick.job_name,
            tick.queue, tick.payload, tick.priority, tick.max_attempts, tick.worker_id,
        )  # fmt: skip

    async def start_waiting_tick(self, tick: NewTick) -> TickRecord | None:
        return await self._locked_tick(
            tick,
            self._q["start_waiting_tick"],
            tick.schedule, tick.job_name, tick.queue, tick.payload, tick.priority,
            tick.max_attempts,
        )  # fmt: skip

    async def _locked_tick(self, tick: NewTick, query: str, *args: Any) -> TickRecord | None:
        """`query` (its text) in a transaction that first locks the schedule's row, if its
        definition is still the tick's: the statement's snapshot, taken after the lock, sees the
        job that the tick decided before it enqueued (a first statement waiting on the lock
        would not). Raises `ScheduleBusyError` when the row is locked elsewhere."""
        try:
            async with self._shared.transaction() as connection:
                locked = await connection.fetchval(
                    self._q["lock_schedule"], tick.schedule, tick.definition_hash
                )
                if locked is None:
                    return None
                row = await connection.fetchrow(query, *args)
        except LockNotAvailableError:
            raise ScheduleBusyError(tick.schedule) from None
        except Exception as error:
            raise_as_store_error(error, schema=self.schema)
        return None if row is None else _tick(row)

    async def schedule_ticks(self, schedule: str, limit: int) -> list[TickRecord]:
        rows = await self._read("fetch", self._q["schedule_ticks"], schedule, limit)
        return [_tick(row) for row in rows]

    async def prune_ticks(self, keep: int) -> int:
        deleted: int = await self._worker_write("fetchval", self._q["prune_ticks"], keep)
        return deleted


def _tick(row: Mapping[str, Any]) -> TickRecord:
    return TickRecord(
        schedule=row["schedule"],
        at=row["tick_at"],
        status=TickStatus(row["status"]),
        reason=row["reason"],
        job_id=row["job_id"],
        recorded_at=row["recorded_at"],
        worker_id=row["worker_id"],
    )
