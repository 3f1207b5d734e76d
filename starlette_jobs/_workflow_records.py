"""The records of workflows (docs/workflows.md): what `Workflow.enqueue` hands the store to write
(`NewWorkflow` of `NewStep`s), and what `jobs.workflow(id)` returns (`WorkflowRecord` of
`StepRecord`s)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ._errors import WorkflowDefinitionError
from ._records import FINISHED, JobRecord, JobStatus


@dataclass(frozen=True, slots=True)
class StepJob:
    """What the steps of one job share: its registered name, queue, priority and attempts."""

    name: str
    queue: str
    priority: int
    max_attempts: int


@dataclass(frozen=True, slots=True, kw_only=True)
class NewStep:
    """One step to insert: a job, and the positions (in the workflow's steps) of those it waits
    for; `NewWorkflow.of` makes a workflow of them."""

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
    where each comes after those it waits for, a column per field rather than an object per
    step: a workflow of 10,000 steps is built and written without 10,000 of anything but its
    names and payloads (docs/performance.md, "With workflows")."""

    name: str
    trace_context: str | None
    steps: Sequence[str]
    """The step names (as `Workflow` allows them: no comma, which the PostgreSQL store joins
    them with), in order; the other per-step fields are by position in it."""
    payloads: Sequence[str]
    """Each step's validated arguments, as JSON text."""
    jobs: Sequence[StepJob]
    job_of: Sequence[int]
    """Each step's job, as a position in `jobs`."""
    upstream: Mapping[int, Sequence[int]]
    """For each step that waits (only those), the positions of the steps it waits for, in
    increasing order (each before its own)."""
    allowed_failures: Mapping[int, int]
    """For each step that waits, how many of those it waits for may end otherwise than
    succeeded (0: none may)."""

    @classmethod
    def of(cls, name: str, steps: Sequence[NewStep], trace_context: str | None) -> NewWorkflow:
        """The workflow of these steps (each after those it waits for)."""
        jobs: dict[StepJob, int] = {}
        job_of = [
            jobs.setdefault(StepJob(s.name, s.queue, s.priority, s.max_attempts), len(jobs))
            for s in steps
        ]
        waiting = [(position, s) for position, s in enumerate(steps) if s.upstream]
        return cls(
            name=name,
            trace_context=trace_context,
            steps=[s.step for s in steps],
            payloads=[s.payload for s in steps],
            jobs=list(jobs),
            job_of=job_of,
            upstream={position: sorted(s.upstream) for position, s in waiting},
            allowed_failures={position: s.allowed_failures for position, s in waiting},
        )

    def queue_of(self, position: int) -> str:
        return self.jobs[self.job_of[position]].queue

    def step_records(self) -> list[NewStep]:
        """A `NewStep` per step, as `of` takes them: for the few steps a running step adds
        (`_added_steps.split_added`), not for the big workflows this shape is for."""
        return [
            NewStep(
                step=step, name=job.name, queue=job.queue, payload=payload,
                priority=job.priority, max_attempts=job.max_attempts,
                upstream=tuple(self.upstream.get(position, ())),
                allowed_failures=self.allowed_failures.get(position, 0),
            )
            for position, (step, payload, job) in enumerate(
                zip(self.steps, self.payloads, (self.jobs[j] for j in self.job_of), strict=True)
            )
        ]  # fmt: skip


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


def split_added(
    given: Sequence[NewStep], workflow_id: int, existing: Mapping[str, tuple[int, str, str]]
) -> tuple[list[NewStep], dict[str, int]]:
    """What the stores do with steps to add, given `existing`: the workflow's steps already
    named as some of those given, as step name -> (job id, job name, payload as JSON text).
    Returns the steps to insert (those of a new name, each waiting for positions among them)
    and the job id of each step kept (added before, with the same job and arguments).

    Raises:
        WorkflowDefinitionError: a name is taken by another job or other arguments, or a step
            to insert waits for one kept (it would count a step that may have finished).
    """
    kept: dict[str, int] = {}
    for step in given:
        found = existing.get(step.step)
        if found is None:
            continue
        job_id, name, payload = found
        if name != step.name or json.loads(payload) != json.loads(step.payload):
            raise WorkflowDefinitionError(
                f"workflow {workflow_id} has a step {step.step!r} already (job {job_id}, "
                f"{name} with other arguments): give each step it adds a name of its own"
            )
        kept[step.step] = job_id
    if not kept:
        return list(given), kept
    position: dict[int, int] = {}
    inserted: list[NewStep] = []
    for at, step in enumerate(given):
        if step.step in kept:
            continue
        waits_for_kept = [given[up].step for up in step.upstream if up not in position]
        if waits_for_kept:
            raise WorkflowDefinitionError(
                f"step {step.step!r} waits for {waits_for_kept[0]!r}, which was added before "
                f"(job {kept[waits_for_kept[0]]}): a step added again is kept as it was, and "
                "only steps added together may wait for each other"
            )
        position[at] = len(inserted)
        upstream = tuple(position[up] for up in step.upstream)
        inserted.append(dataclasses.replace(step, upstream=upstream))
    return inserted, kept


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkflowSummary:
    """A workflow as `jobs.workflows()` lists it: its steps counted by status, not read."""

    id: int
    name: str
    created_at: datetime
    steps: Mapping[JobStatus, int]
    """How many of its steps are in each status (the statuses it has steps in)."""

    @property
    def step_count(self) -> int:
        return sum(self.steps.values())

    @property
    def finished(self) -> bool:
        """Whether every step has ended: succeeded, failed or cancelled."""
        return all(status in FINISHED for status in self.steps)
