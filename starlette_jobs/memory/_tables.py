"""The in-memory store's tables: the data several stores of one name share (`MemoryData`), and
the row-level operations its methods are made of (`MemoryTables`), as PostgreSQL's table,
indexes and statements would do them. `_store.MemoryStore` builds the `Store` protocol on them."""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING
from uuid import UUID

from .._errors import IdempotencyKeyReusedError
from .._queue import QueueControls
from .._records import FINISHED, EventKind, JobStatus, NewJobs
from ._outage import SimulatedOutage
from ._rows import OutcomeListener, QueueListener, Row

if TYPE_CHECKING:
    from .._bulk_records import BulkRecord
    from .._schedule_records import TickRecord
    from .._worker_records import WorkerRecord
    from ._rows import ScheduleRow

LIVE = (JobStatus.PENDING, JobStatus.RUNNING)


def utc_now() -> datetime:
    return datetime.now(UTC)


class RowTable(dict[int, Row]):
    """The jobs by id, and the ids of the pending ones by queue: a claim looks at those, where
    it looked at every job kept (finished ones too: at 40,000 jobs the memory store ran them
    ten times slower than PostgreSQL). A row tells the table when its status changes
    (`Row.__setattr__`). Rows come and go through `[]` and `del` only."""

    def __init__(self) -> None:
        super().__init__()
        self._pending: dict[str, set[int]] = {}

    def __setitem__(self, job_id: int, row: Row) -> None:
        replaced = self.get(job_id)
        if replaced is not None:
            self._pending.get(replaced.queue, set()).discard(job_id)
        super().__setitem__(job_id, row)
        object.__setattr__(row, "_table", self)
        self.status_changed(row, row.status)

    def __delitem__(self, job_id: int) -> None:
        row = self[job_id]
        self._pending.get(row.queue, set()).discard(job_id)
        object.__setattr__(row, "_table", None)
        super().__delitem__(job_id)

    def status_changed(self, row: Row, status: JobStatus) -> None:
        pending = self._pending.setdefault(row.queue, set())
        if status is JobStatus.PENDING:
            pending.add(row.id)
        else:
            pending.discard(row.id)

    def pending(self, queue: str) -> list[Row]:
        """The pending jobs of `queue`, due or not, in no order."""
        return [self[job_id] for job_id in self._pending.get(queue, ())]


class MemoryData:
    """What every `MemoryStore` of one name shares: the database, on PostgreSQL."""

    def __init__(self) -> None:
        self.rows = RowTable()
        self.ids = itertools.count(1)
        self.listeners: set[QueueListener] = set()
        self.outcome_listeners: set[OutcomeListener] = set()
        self.outage: SimulatedOutage | None = None  # see `memory._outage`
        # Periodic jobs (`memory/_schedules.py`): the schedules by name, their ticks by
        # (schedule, tick time).
        self.schedules: dict[str, ScheduleRow] = {}
        self.ticks: dict[tuple[str, datetime], TickRecord] = {}
        # Queue controls by queue name (`memory._controls`); a queue left out has none.
        self.queues: dict[str, QueueControls] = {}
        # The latest starts of each rate-limited queue, the oldest first.
        self.recent_starts: dict[str, list[datetime]] = {}
        # The worker registry by worker id (`memory._registry`).
        self.workers: dict[str, WorkerRecord] = {}
        self.worker_schedules: dict[str, dict[str, str]] = {}  # by worker id
        # Workflows by id (`memory._workflows`): name and when it was enqueued.
        self.workflows: dict[int, tuple[str, datetime]] = {}
        self.workflow_ids = itertools.count(1)
        # Bulk actions by id (`memory._bulk`).
        self.bulks: dict[int, BulkRecord] = {}
        self.bulk_ids = itertools.count(1)  # never one a pruned record had: a sequence's ids
        # The attempts ended per (queue, minute) (`memory._throughput`): succeeded, failed,
        # retried.
        self.throughput: dict[tuple[str, datetime], list[int]] = {}

    def drop_listeners(self) -> None:
        self.listeners.clear()
        self.outcome_listeners.clear()


class MemoryTables:
    """The rows of one `MemoryStore` and what several of its methods do to them: insert, find a
    key's holder, claim order, the lease fence, and the event and NOTIFY that follow a change."""

    def __init__(self, data: MemoryData | None = None) -> None:
        self.data = data or MemoryData()
        self._rows, self._ids = self.data.rows, self.data.ids
        self._listeners, self._outcome_listeners = self.data.listeners, self.data.outcome_listeners
        # This store's own, closed with it; the other stores' on the data are left listening.
        self._opened: list[QueueListener | OutcomeListener] = []
        self.record_events = True

    def _insert(self, new: NewJobs, ids: list[int]) -> list[int]:
        now = utc_now()
        for job_id, payload in zip(ids, new.payloads, strict=True):
            self._rows[job_id] = Row.new(new, job_id, payload, now)
        if new.notify:
            self._notify(new.queue)
        return ids

    def _holder(self, new: NewJobs, *, check_arguments: bool = False) -> Row | None:
        """The job holding a key of `new`, its idempotency key's holder first (as on
        PostgreSQL). With `check_arguments`, raises `IdempotencyKeyReusedError` if that holder
        has another payload."""
        if new.idempotency_key is not None:
            holder = next((r for r in self._rows.values() if r.holds_idempotency_key(new)), None)
            if holder is not None:
                if check_arguments and not holder.has_payload(new.payloads[0]):
                    raise IdempotencyKeyReusedError(new.name, holder.id, new.idempotency_key)
                return holder
        if new.unique_key is None:
            return None
        return next((r for r in self._rows.values() if r.holds_unique_key(new)), None)

    def _live_holder(self, unique_key: str) -> Row | None:
        return next(
            (r for r in self._rows.values() if r.unique_key == unique_key and r.status in LIVE),
            None,
        )

    def _notify(self, queue: str) -> None:
        for listener in list(self._listeners):
            listener.notify(queue)

    def _changed(
        self,
        row: Row,
        kind: EventKind,
        now: datetime,
        error: str | None = None,
        by: str | None = None,
    ) -> None:
        """What follows every change of a row's state in the same statement on PostgreSQL: its
        event, and the NOTIFY of a finished job that someone waits for."""
        # A success is told from the row, as on PostgreSQL (`Row.history`).
        if self.record_events and kind is not EventKind.SUCCEEDED:
            row.log(kind, now, error=error, by=by)
        if row.outcome_wanted and row.status in FINISHED:
            for listener in list(self._outcome_listeners):
                listener.on_finished(row.id)

    # -- workers -------------------------------------------------------------------------------

    def _due(
        self,
        queue: str,
        limit: int,
        exclude: set[int] | None = None,
        names: Sequence[str] | None = None,
    ) -> list[Row]:
        """What a claim of `queue` takes, in claim order: with `names`, only jobs of those."""
        now = utc_now()
        wanted = None if names is None else frozenset(names)
        return heapq.nsmallest(
            limit,
            (
                r
                for r in self._rows.pending(queue)
                if r.run_at <= now
                and (not exclude or r.id not in exclude)
                and (wanted is None or r.name in wanted)
            ),
            key=lambda r: (-r.priority, r.run_at, r.id),
        )

    def _held(self, job_id: int, token: UUID) -> Row | None:
        row = self._rows.get(job_id)
        return row if row is not None and row.lease_token == token else None

    def _running(self) -> list[Row]:
        return [r for r in self._rows.values() if r.status is JobStatus.RUNNING]
