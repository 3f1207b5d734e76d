"""Workflows in the in-memory store (docs/workflows.md), as the PostgreSQL store keeps them: a
step waiting for others is `waiting` until the last of them finishes, then pending or
cancelled. A method runs to its end without awaiting, so telling the waiting steps (and those
a cancellation reaches in turn) happens at once with the outcome. `_store.MemoryStore` is built
on it."""

from __future__ import annotations

from collections import Counter
from datetime import datetime
from typing import Any

from .._errors import MemoryStoreUnsupportedError
from .._records import FINISHED, EventKind, JobStatus, NewJobs
from .._workflow_records import (
    EnqueuedWorkflow,
    NewWorkflow,
    UpstreamStep,
    WorkflowRecord,
    WorkflowSummary,
    workflow_record,
)
from ._rows import Row
from ._tables import MemoryTables, utc_now


class MemoryWorkflows(MemoryTables):
    """`MemoryTables` with the protocol's workflow methods."""

    async def insert_workflow(
        self, new: NewWorkflow, connection: Any | None = None
    ) -> EnqueuedWorkflow:
        if connection is not None:
            raise MemoryStoreUnsupportedError(
                "the in-memory store cannot join a PostgreSQL transaction (connection=): "
                "test that code on PostgreSQL (starlette_jobs.testing's `jobs_database`)"
            )
        now = utc_now()
        workflow_id = next(self.data.workflow_ids)
        self.data.workflows[workflow_id] = (new.name, now)
        ids = [next(self._ids) for _ in new.steps]
        dependents: dict[int, list[int]] = {}
        for position, waited in new.upstream.items():
            for up in waited:
                dependents.setdefault(ids[up], []).append(ids[position])
        woken = set()
        for position, (job_id, step, payload) in enumerate(
            zip(ids, new.steps, new.payloads, strict=True)
        ):
            job = new.jobs[new.job_of[position]]
            one = NewJobs(
                name=job.name, queue=job.queue, payloads=[payload], priority=job.priority,
                delay=None, run_at=now, max_attempts=job.max_attempts,
                trace_context=new.trace_context, unique_key=None, notify=False,
            )  # fmt: skip
            row = self._rows[job_id] = Row.new(one, job_id, payload, now)
            row.workflow_id, row.step = workflow_id, step
            row.dependents = sorted(dependents[job_id]) if job_id in dependents else None
            upstream = new.upstream.get(position)
            if upstream:
                row.status = JobStatus.WAITING
                row.upstream = sorted(ids[up] for up in upstream)
                row.upstream_left, row.upstream_failed = len(upstream), 0
                row.allowed_failures = new.allowed_failures[position]
            else:
                woken.add(job.queue)
        for queue in woken:
            self._notify(queue)
        return EnqueuedWorkflow(workflow_id, dict(zip(new.steps, ids, strict=True)))

    def _give_back(self, row: Row, by: str | None = None) -> EventKind:
        """A release of a running job (`Row.give_back`), its event written; a workflow's step
        that it cancelled (it was asked to stop) tells the steps waiting for it, as a cancel
        does."""
        now = utc_now()
        kind = row.give_back(now)
        self._changed(row, kind, now, by=by)
        if kind is EventKind.CANCELLED and row.dependents is not None:
            self._tell_dependents(row, now)
        return kind

    def _tell_dependents(self, finished: Row, now: datetime) -> None:
        """The steps waiting for `finished` count its outcome: released once the last of those
        they wait for has finished, cancelled once more of them failed than they allow (and
        then the steps waiting for those, in turn: without recursion, a cancelled chain of
        thousands of steps would exhaust the stack)."""
        owed = [finished]
        while owed:
            owed.extend(self._tell_one(owed.pop(), now))

    def _tell_one(self, finished: Row, now: datetime) -> list[Row]:
        """`_tell_dependents` for one step; returns the steps it cancelled that have dependents."""
        finished.settled = True
        failed = finished.status is not JobStatus.SUCCEEDED
        cause = f"step {finished.step} (job {finished.id}) {finished.status.value}"
        cancelled = []
        woken = set()
        for dependent_id in finished.dependents or ():
            row = self._rows.get(dependent_id)
            if row is None or row.status is not JobStatus.WAITING:
                continue
            assert row.upstream_left is not None
            assert row.upstream_failed is not None
            assert row.allowed_failures is not None
            assert row.upstream is not None
            row.upstream_left -= 1
            row.upstream_failed += failed
            if row.upstream_failed > row.allowed_failures:
                row.status, row.finished_at = JobStatus.CANCELLED, now
                row.last_error = (
                    f"cancelled: it waits for {cause}"
                    if row.allowed_failures == 0
                    else f"cancelled: {row.upstream_failed} of the {len(row.upstream)} steps it "
                    f"waits for did not succeed, at most {row.allowed_failures} may "
                    f"(latest: {cause})"
                )
                self._changed(row, EventKind.CANCELLED, now, row.last_error)
                cancelled.append(row)
            elif row.upstream_left == 0:
                row.status, row.run_at = JobStatus.PENDING, now
                self._changed(row, EventKind.READY, now)
                woken.add(row.queue)
        for queue in woken:
            self._notify(queue)
        return [row for row in cancelled if row.dependents is not None]

    def _upstream_counts(self, row: Row) -> tuple[int, int]:
        """How many of the steps `row` waits for have not told it yet (a step counts as finished
        once it has), and how many of those that have did not succeed."""
        assert row.upstream is not None
        ups = [u for u in (self._rows.get(i) for i in row.upstream) if u is not None]
        told = [u for u in ups if u.settled and u.status in FINISHED]
        failed = sum(u.status is not JobStatus.SUCCEEDED for u in told)
        return len(row.upstream) - len(told), failed

    def _upstream_failed_beyond_allowed(self, row: Row) -> bool:
        """Whether more of the steps `row` waits for failed (and told it) than it allows: a
        retry of `row` would run it without them. Counted now: a step cancelled by hand while
        it waited was not told of the failures after."""
        if row.upstream is None or row.allowed_failures is None:
            return False
        return self._upstream_counts(row)[1] > row.allowed_failures

    def _reopen(self, step_ids: list[int], now: datetime) -> None:
        """A step was retried: the steps waiting for it count their upstream again (a step
        counts as finished once it has told them), and those a failure had cancelled wait
        again, passing it on to theirs."""
        frontier = sorted(step_ids)
        while frontier:
            next_ids: set[int] = set()
            for row in (self._rows.get(i) for i in frontier):
                if row is None or row.upstream is None or row.allowed_failures is None:
                    continue
                cancelled = row.cancelled_by_upstream
                if row.status is not JobStatus.WAITING and not cancelled:
                    continue
                left, failed = self._upstream_counts(row)
                if cancelled and failed > row.allowed_failures:
                    continue  # another step it waits for failed: it stays cancelled
                row.upstream_left, row.upstream_failed = left, failed
                row.status, row.finished_at, row.settled = JobStatus.WAITING, None, False
                if cancelled:
                    row.last_error = None
                    self._changed(row, EventKind.WAITING, now)
                    next_ids.update(row.dependents or ())
            frontier = sorted(next_ids)

    async def cancel_workflow(self, workflow_id: int) -> list[tuple[int, JobStatus]]:
        now = utc_now()
        changed = []
        steps = sorted((r for r in self._rows.values() if r.workflow_id == workflow_id), key=_id)
        for row in steps:
            if row.status in (JobStatus.PENDING, JobStatus.WAITING):
                row.status, row.finished_at = JobStatus.CANCELLED, now
                row.last_error = "cancelled: its workflow was cancelled"
                row.settled = row.dependents is not None
                self._changed(row, EventKind.CANCELLED, now, row.last_error)
            elif row.status is JobStatus.RUNNING and row.cancel_requested_at is None:
                row.cancel_requested_at = now
                self._changed(row, EventKind.CANCEL_REQUESTED, now)
                for listener in list(self._listeners):
                    assert row.lease_token is not None
                    listener.cancel(row.lease_token)
            else:
                continue
            changed.append((row.id, row.status))
        return changed

    def _waited_for(self, row: Row) -> bool:
        """Whether a step that waits for `row` is still kept (retention keeps `row`: that step
        reads its result when it runs, or when it is retried after it failed)."""
        return row.dependents is not None and any(i in self._rows for i in row.dependents)

    async def settle_steps(self, limit: int = 1000) -> int:
        now = utc_now()
        owed = sorted(
            (
                r
                for r in self._rows.values()
                if r.dependents is not None and not r.settled and r.status in FINISHED
            ),
            key=lambda r: r.id,
        )[:limit]
        for row in owed:
            self._tell_dependents(row, now)
        return len(owed)

    async def upstream_results(self, job_id: int) -> list[UpstreamStep]:
        row = self._rows.get(job_id)
        if row is None or row.upstream is None:
            return []
        found = [self._rows[i] for i in row.upstream if i in self._rows]
        return [UpstreamStep(up.step or "", up.status, up.result) for up in found]

    async def get_workflow(self, workflow_id: int, brief: bool = False) -> WorkflowRecord | None:
        # `brief`: nothing to save in memory, whole records.
        found = self.data.workflows.get(workflow_id)
        if found is None:
            return None
        rows = sorted((r for r in self._rows.values() if r.workflow_id == workflow_id), key=_id)
        upstream = {row.id: row.upstream or [] for row in rows}
        jobs = [row.record() for row in rows]
        return workflow_record(workflow_id, *found, jobs, lambda job: upstream[job.id])

    async def list_workflows(self, limit: int, before: int | None) -> list[WorkflowSummary]:
        ids = sorted((i for i in self.data.workflows if before is None or i < before), reverse=True)
        summaries = []
        for workflow_id in ids[:limit]:
            name, created_at = self.data.workflows[workflow_id]
            steps = Counter(r.status for r in self._rows.values() if r.workflow_id == workflow_id)
            summaries.append(
                WorkflowSummary(id=workflow_id, name=name, created_at=created_at, steps=steps)
            )
        return summaries

    async def workflow_of(self, job_id: int) -> int | None:
        row = self._rows.get(job_id)
        return None if row is None else row.workflow_id


def _id(row: Row) -> int:
    return row.id
