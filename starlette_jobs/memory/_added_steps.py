"""Steps a running workflow's step adds to its workflow (docs/workflows.md), in the in-memory
store, as the PostgreSQL store adds them: only while the attempt holds its lease, each joining
the graph between that step and the steps waiting for it. A method runs to its end without
awaiting, so no outcome can come between. `_store.MemoryStore` is built on it."""

from __future__ import annotations

from uuid import UUID

from .._errors import StepNotRunningError, WorkflowDefinitionError
from .._records import JobStatus, NewJobs
from .._workflow_records import EnqueuedWorkflow, NewWorkflow, split_added
from ._rows import Row
from ._tables import MemoryTables, utc_now


class MemoryAddedSteps(MemoryTables):
    """`MemoryTables` with the protocol's `add_steps`."""

    async def add_steps(self, job_id: int, lease_token: UUID, new: NewWorkflow) -> EnqueuedWorkflow:
        running = self._rows.get(job_id)
        if (
            running is None
            or running.status is not JobStatus.RUNNING
            or running.lease_token != lease_token
            or running.cancel_requested_at is not None
        ):
            raise StepNotRunningError(
                f"job {job_id}: this attempt no longer holds the job's lease, or was asked to "
                "stop; no step added"
            )
        workflow_id = running.workflow_id
        if workflow_id is None:
            raise WorkflowDefinitionError(
                f"job {job_id} is not a workflow's step: only a step can add steps to its workflow"
            )
        names = set(new.steps)
        existing = {
            row.step: (row.id, row.name, row.payload)
            for row in self._rows.values()
            if row.workflow_id == workflow_id and row.step in names
        }
        steps, kept = split_added(new.step_records(), workflow_id, existing)
        now = utc_now()
        ids = [next(self._ids) for _ in steps]
        after = running.dependents or []
        within: dict[int, list[int]] = {}
        for position, step in enumerate(steps):
            for up in step.upstream:
                within.setdefault(ids[up], []).append(ids[position])
        woken = set()
        for job, step in zip(ids, steps, strict=True):
            one = NewJobs(
                name=step.name, queue=step.queue, payloads=[step.payload], priority=step.priority,
                delay=None, run_at=now, max_attempts=step.max_attempts,
                trace_context=running.trace_context, unique_key=None, notify=False,
            )  # fmt: skip
            row = self._rows[job] = Row.new(one, job, step.payload, now)
            row.workflow_id, row.step = workflow_id, step.step
            row.dependents = sorted([*within.get(job, ()), *after]) or None
            if step.upstream:
                row.status = JobStatus.WAITING
                row.upstream = sorted(ids[up] for up in step.upstream)
                row.upstream_left, row.upstream_failed = len(step.upstream), 0
                row.allowed_failures = step.allowed_failures
            else:
                woken.add(step.queue)
        for dependent in (self._rows.get(i) for i in after):
            if dependent is None or dependent.upstream is None or not ids:
                continue
            assert dependent.allowed_failures is not None
            if dependent.allowed_failures == len(dependent.upstream):
                dependent.allowed_failures += len(ids)  # it runs whatever the outcomes
            dependent.upstream = [*dependent.upstream, *ids]
            if dependent.status is JobStatus.WAITING:
                assert dependent.upstream_left is not None
                dependent.upstream_left += len(ids)
        for queue in woken:
            self._notify(queue)
        return EnqueuedWorkflow(
            workflow_id, {**kept, **{s.step: i for s, i in zip(steps, ids, strict=True)}}
        )
