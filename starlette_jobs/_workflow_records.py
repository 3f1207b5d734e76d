"""The records of workflows (docs/workflows.md): what `Workflow.enqueue` hands the store to write
(`NewWorkflow` of `NewStep`s), and what `jobs.workflow(id)` returns (`WorkflowRecord` of
`StepRecord`s)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ._records import FINISHED, JobRecord, JobStatus


@dataclass(frozen=True, slots=True, kw_only=True)
class NewStep:
    """One step to insert: a job, and the positions (in `NewWorkflow.steps`) of those it waits
    for."""

    step: str
    name: str
    """The job's registered name."""
    queue: str
    payload: str
    """The validated arguments, as JSON text."""
    priority: int
    max_attempts: int
    upstream: tuple[int, ...]
    allowed_failures: int
    """How many of the steps it waits for may end otherwise than succeeded (0: none may)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class NewWorkflow:
    """A workflow to insert in one go; see `Store.insert_workflow`. The steps are in an order
    where each comes after those it waits for."""

    name: str
    steps: tuple[NewStep, ...]
    trace_context: str | None


@dataclass(frozen=True, slots=True)
class EnqueuedWorkflow:
    """What `Workflow.enqueue` returns: the workflow's id (for `jobs.workflow`), and each step's
    job id by step name (for `jobs.result` and the other job queries)."""

    id: int
    steps: Mapping[str, int]


@dataclass(frozen=True, slots=True, kw_only=True)
class StepRecord:
    """One step of a workflow, as `jobs.workflow(id)` returns it."""

    step: str
    job: JobRecord
    """The step's job, as `jobs.get` returns it: status, result, errors, attempts."""
    waits_for: tuple[str, ...]
    """The steps it waits for, by step name."""

    @property
    def status(self) -> JobStatus:
        return self.job.status

    @property
    def result(self) -> Any:
        return self.job.result


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkflowRecord:
    """A workflow and its steps (in the order they were added), as `jobs.workflow(id)`
    returns it."""

    id: int
    name: str
    created_at: datetime
    steps: tuple[StepRecord, ...]

    def __getitem__(self, step: str) -> StepRecord:
        """The step named `step`."""
        for record in self.steps:
            if record.step == step:
                return record
        raise KeyError(step)

    @property
    def finished(self) -> bool:
        """Whether every step has ended: succeeded, failed or cancelled."""
        return all(record.status in FINISHED for record in self.steps)

    @property
    def statuses(self) -> dict[str, JobStatus]:
        """Each step's status, by step name."""
        return {record.step: record.status for record in self.steps}


@dataclass(frozen=True, slots=True)
class UpstreamStep:
    """A step that a step waits for, as `Store.upstream_results` returns it."""

    step: str
    status: JobStatus
    result: str | None
    """Its result as JSON text (None: it returned None, or has not succeeded)."""


def workflow_record(
    workflow_id: int, name: str, created_at: datetime, jobs: list[JobRecord], upstream: Any
) -> WorkflowRecord:
    """The `WorkflowRecord` of these step jobs; `upstream(job)` gives the ids a job waits for."""
    step_of = {job.id: job.step or "" for job in jobs}
    steps = tuple(
        StepRecord(
            step=step_of[job.id],
            job=job,
            waits_for=tuple(step_of.get(i, str(i)) for i in upstream(job)),
        )
        for job in jobs
    )
    return WorkflowRecord(id=workflow_id, name=name, created_at=created_at, steps=steps)
