"""The parts of the `Store` protocol (`_protocol.py`) beyond jobs, claims and outcomes: periodic
jobs, queue controls, the worker registry and workflows, one protocol each. `Store` is all of
them; each store implements each part in a module of its own (`postgres/_schedules.py`,
`memory/_schedules.py`, ...)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol
from uuid import UUID

from .._attempt_records import Claim
from .._metric_records import QueueDepth
from .._queue import QueueControls, QueueLimits
from .._records import JobStatus
from .._schedule_records import DeclaredSchedule, NewTick, StoredSchedule, TickRecord
from .._worker_records import NewWorker, UnrunnableJobs, WorkerRecord
from .._workflow_records import (
    EnqueuedWorkflow,
    NewWorkflow,
    UpstreamStep,
    WorkflowRecord,
    WorkflowSummary,
)
from ._listener import Listener


class ScheduleStore(Protocol):
    """Periodic jobs (docs/schedules.md): the schedules the workers declare, and their ticks."""

    async def declare_schedules(self, schedules: Sequence[DeclaredSchedule]) -> None:
        """The code declares these schedules (sorted by name) and no others: writes each whose
        definition is new or changed (a changed one starts afresh, its waiting tick skipped),
        and deletes the others, with their ticks."""
        ...

    async def list_schedules(self) -> list[StoredSchedule]:
        """Every stored schedule, by name, with its latest tick."""
        ...

    async def record_tick(self, tick: NewTick) -> TickRecord | None:
        """Records the tick and enqueues its job (notifying its queue), at once, as its overlap
        policy decides, unless the tick is recorded already or the stored definition's hash is
        no longer `tick.definition_hash`; returns the tick recorded, or None. Ticks of one
        schedule are decided one at a time; the job is `scheduled_for` the tick. Raises
        `ScheduleBusyError` rather than wait for another transaction's lock on the schedule."""
        ...

    async def start_waiting_tick(self, tick: NewTick) -> TickRecord | None:
        """Enqueues the job of the schedule's waiting tick (`overlap="one_waiting"`) once the
        job of the tick before it has finished; `tick` gives the schedule, its hash and the
        job (its time is ignored). Returns the tick, now enqueued, or None; raises
        `ScheduleBusyError` as `record_tick` does."""
        ...

    async def schedule_ticks(self, schedule: str, limit: int) -> list[TickRecord]:
        """The schedule's latest ticks, latest first."""
        ...

    async def prune_ticks(self, keep: int) -> int:
        """Deletes all but each schedule's latest `keep` ticks (a waiting one stays);
        returns how many it deleted."""


class ControlStore(Protocol):
    """Queue controls (docs/limits.md): pausing, and the limits on a queue's running jobs."""

    async def set_paused(self, queue: str, paused: bool) -> None:
        """Pauses (no claim takes its jobs) or resumes `queue`, and tells the workers."""
        ...

    async def declare_queues(self, limits: Mapping[str, QueueLimits]) -> None:
        """A worker starting: the limits of its queues, replacing those declared before (the
        last worker to start wins); the workers are told of each queue whose limits changed.
        Raises `DatabaseTooSlowError` at once, writing nothing, if a row is locked elsewhere."""
        ...

    async def queue_controls(self, queues: Sequence[str]) -> dict[str, QueueControls]:
        """The controls of each of `queues` (neither paused nor limited if never set)."""
        ...

    async def claim_limited_batch(
        self,
        queue: str,
        limit: int,
        worker_id: str,
        lease_seconds: float,
        ended: Sequence[UUID] = (),
        names: Sequence[str] | None = None,
    ) -> list[Claim]:
        """`claim_batch` as the queue's controls allow at this moment, whatever other workers
        claim at the same moment: nothing while it is paused; no more than leave at most its
        global limit of its jobs running, and its key limit per value of its key; no more
        starts in any rate period than its rate limit. `ended`: the lease tokens of attempts that
        have ended but whose outcome is not written yet, not counted as running."""
        ...

    async def wake_queues(self, queues: Sequence[str]) -> None:
        """Wakes the workers of `queues` (as a job becoming due does): jobs of a limited queue
        finished, and one that found no room may claim now."""
        ...


class RegistryStore(Protocol):
    """The worker registry (docs/workers.md): each worker's row, its liveness lock, and what
    the others see of it."""

    async def register_worker(self, worker: NewWorker) -> None:
        """Writes the worker's row, started and seen now (replacing a row of the same id)."""
        ...

    async def worker_seen(self, worker_id: str) -> bool:
        """The worker's heartbeat: its row seen now; False if it has no row (pruned while the
        worker could not reach the store: it registers again)."""
        ...

    async def unregister_worker(self, worker_id: str) -> None:
        """Deletes the worker's row (a clean stop)."""
        ...

    async def list_workers(self) -> list[WorkerRecord]:
        """Every registered worker, by id."""
        ...

    async def worker_schedules(self) -> dict[str, dict[str, str]]:
        """The schedules the code of each registered worker declares, by worker id
        (docs/schedules.md, "Deploys")."""
        ...

    async def queue_depths(self) -> list[QueueDepth]:
        """The pending and running jobs of every queue that has any, by queue name, read
        without reading the finished jobs (the queues' gauges, docs/metrics.md)."""
        ...

    async def unrunnable_jobs(
        self, queues: Sequence[str] | None = None, head: int = 1000
    ) -> list[UnrunnableJobs]:
        """Pending jobs that no registered worker can run (none both works their queue and
        knows their name), by queue and name. With `queues`, only the first `head` due jobs of
        each of them, in claim order; without, every pending job."""
        ...

    async def hold_liveness(self, worker_id: str) -> Listener:
        """Holds the worker's liveness lock on a connection of its own, until it is closed or
        lost (`alive` then says False); the process's death releases it. Taken before the
        worker registers. Raises `DatabaseUnavailableError` if another session holds it (a
        connection of this worker's that the network dropped, which it ends first if it can).
        In memory: nothing to hold, a store of one process."""
        ...

    async def lockless_workers(self, excluding: str | None = None) -> dict[str, datetime]:
        """The registered workers, except `excluding` (the caller), whose liveness lock is
        free: dead, or alive and taking again a lock freed under them a moment ago; by id, with
        when each last wrote its row (`WorkerRecord.last_seen`: a live worker writes it each
        time it takes its lock again, a dead one never). None while `excluding`'s own lock is
        free. In memory: none."""
        ...

    async def rescue_dead_workers(
        self,
        limit: int,
        excluding: str | None = None,
        among: Mapping[str, datetime] | None = None,
    ) -> list[tuple[int, str, JobStatus]]:
        """Up to `limit` running jobs of registered workers whose liveness lock is free (their
        process died), only of those in `among` if given (found so a while ago, too long for a
        live worker) whose row was last written when `among` says (written since: the worker
        took its lock again meanwhile, alive), except worker `excluding`'s (the caller's own: a
        lock it lost a moment ago its own check handles), and none while `excluding`'s own lock
        is free (what freed it likely freed the others', who are taking theirs again): back to
        pending, or failed, or cancelled, as `rescue_expired` decides; deletes those workers'
        rows. Returns (id, queue, new status) of each. In memory: none (a dead worker's process
        took the store with it)."""
        ...

    async def prune_workers(self, missed_heartbeats: float) -> list[str]:
        """Deletes the rows of workers unseen for `missed_heartbeats` of their own heartbeat
        intervals (they died); returns their ids."""
        ...


class WorkflowStore(Protocol):
    """Workflows (docs/workflows.md): several jobs written at once, each waiting for others."""

    async def insert_workflow(
        self, new: NewWorkflow, connection: Any | None = None
    ) -> EnqueuedWorkflow:
        """Writes the workflow and its steps at once: a step that waits for none pending, the
        others `waiting` (no claim takes them). Every change that finishes a step (its outcome,
        a cancel, a rescue) tells the steps waiting for it: when the last one they wait for
        has finished, each becomes pending (event `ready`), or is cancelled (its error naming
        the cause) once more of them than it allows ended otherwise than succeeded, and so on
        down the graph. `record_outcomes` tells them in the statement that writes the
        outcome; a change that cannot leaves it to `settle_steps`. `connection`: as for
        `insert_jobs`."""
        ...

    async def settle_steps(self, limit: int = 1000) -> int:
        """Tells the steps waiting for finished steps that have not told them yet (and those
        it cancels in turn, down the graph); returns how many finished steps it settled."""
        ...

    async def cancel_workflow(self, workflow_id: int) -> list[tuple[int, JobStatus]]:
        """Every step of the workflow not finished: waiting and pending ones cancelled (error
        "cancelled: its workflow was cancelled"), running ones asked to stop as `cancel_job`
        asks. Returns (id, status after) of each step changed, by id."""
        ...

    async def upstream_results(self, job_id: int) -> list[UpstreamStep]:
        """The steps that the step `job_id` waits for, with their status and result, by id."""
        ...

    async def get_workflow(self, workflow_id: int, brief: bool = False) -> WorkflowRecord | None:
        """The workflow and its steps, in the order they were written; `brief`: each step's
        job as `list_jobs(brief=True)` reads it (for a page that shows a line of each)."""
        ...

    async def list_workflows(self, limit: int, before: int | None) -> list[WorkflowSummary]:
        """The most recent workflows first, with ids below `before` if given, each with its
        steps counted by status."""
        ...

    async def add_steps(self, job_id: int, lease_token: UUID, new: NewWorkflow) -> EnqueuedWorkflow:
        """Adds `new`'s steps to the workflow of the step `job_id`, while it runs under
        `lease_token`, in one transaction: each joins the graph between that step and the
        steps waiting for it, which count the added steps as unfinished upstream steps (a step
        that runs whatever the outcomes still does), and read their results. A step named as
        one of the workflow's, with the same job and arguments, is kept as it is (the step
        that adds it retried). Returns the workflow's id and each step's job id, by name.

        Raises:
            StepNotRunningError: `lease_token` no longer holds the job; nothing is written.
            WorkflowDefinitionError: the job is not a workflow's step, or a name is taken
                (see `split_added`); nothing is written.
        """
        ...

    async def workflow_of(self, job_id: int) -> int | None:
        """The id of the workflow the job `job_id` is a step of; None for a job of no workflow
        (or no such job). Read only off the hot path (a step whose result cannot be stored)."""
        ...
