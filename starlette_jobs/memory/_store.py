"""The in-memory store: `Jobs("memory://")`, for tests that want no database.

It keeps the PostgreSQL store's semantics (claim order, leases and their expiry, the fence of
every write by lease token, retries, unique and idempotency keys, ids reserved ahead of the
write, release, retention, counts), held to them by the same contract suite. It lives in one
process and one event loop: every method runs to its end without awaiting, so no two of them
interleave, as PostgreSQL's row locks would ensure.

It can be told to fail as an unavailable database would (`memory/_outage.py`).

What only PostgreSQL does, it refuses with `MemoryStoreUnsupportedError` rather than pretend:
joining a caller's transaction (`connection=`), migrations of a real schema aside. Several
processes cannot share it: `starlette-jobs worker` needs PostgreSQL.

`Jobs("memory://")` gets a store of its own; `Jobs("memory://name")` shares one with every
other `Jobs` of the process that names it (a producer and a worker in one test, say). What they
share is the data (`MemoryData`: rows, ids, who listens); each `Jobs` gets a `MemoryStore` of its
own over it, as each gets connections of its own on PostgreSQL, so that its own settings
(`events`) apply to its own writes, and closing it closes only its own listeners.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from datetime import timedelta
from operator import attrgetter
from typing import Any
from uuid import UUID

from .._attempt_records import Claim, Outcome, PruneCursor, Pruned, Renewal, Unfinished
from .._errors import MemoryStoreUnsupportedError
from .._records import FINISHED, EventKind, JobStatus, NewJobs
from ..memory._outage import failing_in_outages
from ._added_steps import MemoryAddedSteps
from ._bulk import MemoryBulk
from ._completions import MemoryCompletions
from ._controls import MemoryControls
from ._counts import MemoryCounts
from ._depths import MemoryDepths
from ._jsonb import jsonb_text
from ._queries import MemoryQueries
from ._registry import MemoryRegistry
from ._rows import OutcomeListener, QueueListener
from ._schedules import MemorySchedules
from ._tables import MemoryData, utc_now
from ._throughput import MemoryThroughput
from ._workflows import MemoryWorkflows

SCHEME = "memory://"
# The data of stores shared by name in this process, while a `Jobs` holds them.
_named: weakref.WeakValueDictionary[str, MemoryData] = weakref.WeakValueDictionary()


def is_memory_dsn(dsn: str) -> bool:
    return dsn.startswith(SCHEME)


def memory_store(dsn: str, schema: str | None = None) -> MemoryStore:
    """The store `dsn` ("memory://" or "memory://name") names; with `schema` (`Jobs(schema=...)`),
    that schema's tables of it: stores of one name and different schemas share nothing, as two
    schemas of one PostgreSQL database share no table."""
    name = dsn[len(SCHEME) :]
    if not name:
        return MemoryStore()
    if schema is not None:
        name = f"{name}\x00{schema}"  # no schema name has a NUL: no clash with another name
    data = _named.get(name)
    if data is None:
        data = _named[name] = MemoryData()
    return MemoryStore(data)


@failing_in_outages
class MemoryStore(
    MemoryBulk,
    MemoryQueries,
    MemoryRegistry,
    MemorySchedules,
    MemoryControls,
    MemoryCompletions,
    MemoryWorkflows,
    MemoryAddedSteps,
    MemoryDepths,
    MemoryCounts,
    MemoryThroughput,
):
    """The `Store` protocol on a dict; see the module's docstring."""

    @property
    def name(self) -> str:
        return "memory"

    @property
    def database(self) -> object:
        return self.data

    async def migrate(self) -> list[str]:
        return []

    async def check_schema(self, *, complete: bool) -> None:
        return None

    # -- producers -----------------------------------------------------------------------------

    async def insert_jobs(self, new: NewJobs, connection: Any | None = None) -> list[int]:
        if connection is not None:
            raise MemoryStoreUnsupportedError(
                "the in-memory store cannot join a PostgreSQL transaction (connection=): "
                "test that code on PostgreSQL (starlette_jobs.testing's `jobs_database`)"
            )
        holder = self._holder(new, check_arguments=True)
        if holder is not None:
            return [holder.id]
        return self._insert(new, [next(self._ids) for _ in new.payloads])

    async def reserve_ids(self, new: NewJobs) -> tuple[list[int], bool]:
        holder = self._holder(new, check_arguments=True)
        if holder is not None:
            return [holder.id], True
        return [next(self._ids) for _ in new.payloads], False

    async def insert_reserved(self, batch: Sequence[NewJobs]) -> set[int]:
        # All or nothing, as PostgreSQL's transaction does: a key taken, or one taken twice.
        keys = [(new.name, new.idempotency_key) for new in batch if new.idempotency_key]
        keys += [("", new.unique_key) for new in batch if new.unique_key]  # "": no job's name
        if len(set(keys)) < len(keys) or any(self._holder(new) for new in batch):
            return set()
        return {i for new in batch for i in self._insert(new, list(new.ids))}

    async def claim_batch(
        self,
        queue: str,
        limit: int,
        worker_id: str,
        lease_seconds: float,
        names: Sequence[str] | None = None,
    ) -> list[Claim]:
        now = utc_now()
        claims = []
        for row in self._due(queue, limit, names=names):
            claims.append(row.claim(worker_id, now + timedelta(seconds=lease_seconds), now))
            self._changed(row, EventKind.CLAIMED, now)
        return claims

    async def record_outcomes(self, outcomes: Sequence[Outcome]) -> set[int]:
        now = utc_now()
        written = set()
        # In id order, as PostgreSQL's statement names the cause of a step it cancels.
        for outcome in sorted(outcomes, key=attrgetter("id")):
            row = self._held(outcome.id, outcome.lease_token)
            if row is not None:
                self._changed(row, row.end(outcome, now), now, outcome.error)
                if row.dependents is not None and row.status in FINISHED:
                    self._tell_dependents(row, now)
                written.add(row.id)
        return written

    async def locked_jobs(self, ids: Sequence[int]) -> set[int]:
        return set()  # no transaction holds a row here

    async def extend_leases(
        self, held: Sequence[tuple[int, UUID]], lease_seconds: float
    ) -> dict[UUID, Renewal]:
        renewed = {}
        for job_id, token in held:
            row = self._held(job_id, token)
            if row is not None:
                row.lease_expires_at = utc_now() + timedelta(seconds=lease_seconds)
                renewed[token] = Renewal(True, row.cancel_requested_at is not None)
        return renewed

    async def record_progress(self, progress: Sequence[tuple[int, UUID, str]]) -> set[int]:
        written = set()
        for job_id, token, text in progress:
            row = self._held(job_id, token)
            if row is not None:
                row.progress = jsonb_text(text)
                written.add(job_id)
        return written

    async def release_jobs(self, held: Sequence[tuple[int, UUID]]) -> set[int]:
        released = set()
        woken = set()
        for job_id, token in held:
            row = self._held(job_id, token)
            if row is not None:
                if self._give_back(row) is EventKind.RELEASED:
                    woken.add(row.queue)
                released.add(job_id)
        for queue in woken:
            self._notify(queue)
        return released

    async def release_unknown_claims(
        self, queue: str, worker_id: str, known: Sequence[UUID]
    ) -> list[int]:
        known_tokens = set(known)
        rows = [
            r
            for r in self._running()
            if r.queue == queue and r.worker_id == worker_id and r.lease_token not in known_tokens
        ]
        for row in rows:
            self._give_back(row)
        return sorted(row.id for row in rows)

    async def rescue_expired(self, limit: int) -> list[tuple[int, str, JobStatus]]:
        now = utc_now()
        expired = sorted(
            (
                r
                for r in self._running()
                if r.lease_expires_at
                and r.lease_expires_at < now
                # The registry saw its worker lately: its renewal was held up, not stopped.
                and not self._is_live(r.worker_id, now)
            ),
            key=lambda r: (r.lease_expires_at, r.id),
        )[:limit]
        rescued = []
        for row in expired:
            self._changed(row, row.rescue(now), now, row.last_error)
            rescued.append((row.id, row.queue, row.status))
        for queue in {queue for _, queue, status in rescued if status is JobStatus.PENDING}:
            self._notify(queue)
        return rescued

    async def prune_finished(
        self, retention_seconds: float, limit: int, after: PruneCursor | None = None
    ) -> Pruned:
        cutoff = utc_now() - timedelta(seconds=retention_seconds)
        # The next `limit` old jobs, as PostgreSQL looks at them: by (finished_at, id).
        looked_at = sorted(
            (
                (r.finished_at, r.id)
                for r in self._rows.values()
                if r.status in FINISHED
                and r.finished_at
                and r.finished_at < cutoff
                and (after is None or (r.finished_at, r.id) > after)
            ),
        )[:limit]
        # Every step of a workflow with a step to run is kept, as on PostgreSQL.
        running_flows = {
            r.workflow_id
            for r in self._rows.values()
            if r.workflow_id is not None and r.status not in FINISHED
        }
        looked = [self._rows[job_id] for _, job_id in looked_at]
        old = [r for r in looked if r.workflow_id not in running_flows and not self._waited_for(r)]
        for row in old:
            del self._rows[row.id]
        # A workflow's record goes with its last step, as on PostgreSQL.
        flows = {row.workflow_id for row in old if row.workflow_id is not None}
        if flows:
            flows.difference_update(r.workflow_id for r in self._rows.values())
        for workflow_id in flows:
            self.data.workflows.pop(workflow_id, None)
        return Pruned(len(old), looked_at[-1] if len(looked_at) == limit else None)

    async def count_unfinished(
        self,
        queues: Sequence[str],
        horizon_seconds: float | None,
        retry_horizon_seconds: float | None,
        names: Sequence[str] | None = None,
    ) -> Unfinished:
        now = utc_now()
        first, retry = (
            None if seconds is None else now + timedelta(seconds=seconds)
            for seconds in (horizon_seconds, retry_horizon_seconds)
        )
        waited = scheduled = retries = unknown = 0
        for r in self._rows.values():
            if r.queue not in queues or r.status not in (JobStatus.PENDING, JobStatus.RUNNING):
                continue
            if r.status is JobStatus.PENDING and names is not None and r.name not in names:
                unknown += 1
                continue
            horizon = retry if r.attempts > 0 else first
            if r.status is JobStatus.RUNNING or horizon is None or r.run_at <= horizon:
                waited += 1
            elif r.attempts > 0:
                retries += 1
            else:
                scheduled += 1
        return Unfinished(waited, scheduled, retries, unknown)

    async def listen(
        self,
        queues: Sequence[str],
        on_notify: Callable[[str], None],
        on_cancel: Callable[[UUID], None] | None = None,
        on_controls: Callable[[str], None] | None = None,
    ) -> QueueListener:
        listener = QueueListener(self._listeners, queues, on_notify, on_cancel, on_controls)
        self._listeners.add(listener)
        self._opened.append(listener)
        return listener

    async def listen_for_outcomes(self, on_finished: Callable[[int], None]) -> OutcomeListener:
        listener = OutcomeListener(self._outcome_listeners, on_finished)
        self._outcome_listeners.add(listener)
        self._opened.append(listener)
        return listener

    async def want_outcome(self, job_id: int) -> JobStatus | None:
        row = self._rows.get(job_id)
        if row is None:
            return None
        row.outcome_wanted = True
        return row.status

    async def expire_connections(self) -> None:
        return None

    # -- closing -------------------------------------------------------------------------------

    async def close(self) -> None:
        self.terminate()

    def terminate(self) -> None:
        opened, self._opened = self._opened, []
        for listener in opened:
            listener.terminate()
