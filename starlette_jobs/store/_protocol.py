"""The `Store` protocol: what the rest of the library asks of wherever jobs are kept.

It speaks of jobs, claims, leases and outcomes, never of SQL, so that a second implementation
stays small. Two implement it: `PostgresStore` (`postgres/_store.py`), and `MemoryStore`
(`memory/_store.py`) for tests that want no database. The contract suite
(`tests/contract/test_store_contract.py`) runs the same tests against both.

Every change after a claim is fenced by the lease token the claim handed out: a caller that no
longer holds it changes nothing.

Every change of a job's state writes its event (`JobEvent`) in the same statement, unless
`record_events` is off: the history cannot disagree with the state. A job asked to stop
(`cancel_job` on a running job) never goes back to pending: where it would (a retry, a release,
a rescue), it ends `cancelled` instead.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol
from uuid import UUID

from .._metric_records import QueueDepth
from .._queue import QueueControls, QueueLimits
from .._records import Claim, JobEvent, JobRecord, JobStatus, NewJobs, Outcome, Renewal, Unfinished
from .._schedule_records import DeclaredSchedule, NewTick, StoredSchedule, TickRecord
from .._worker_records import NewWorker, UnrunnableJobs, WorkerRecord
from .._workflow_records import EnqueuedWorkflow, NewWorkflow, UpstreamStep, WorkflowRecord


class Listener(Protocol):
    """A subscription to queues' wake-ups (LISTEN/NOTIFY on PostgreSQL)."""

    async def alive(self, timeout: float) -> bool:
        """Whether wake-ups still arrive (a connection may have gone silent)."""
        ...

    async def close(self) -> None: ...

    def terminate(self) -> None: ...


class Store(Protocol):
    """Where jobs are kept; see the module's docstring."""

    @property
    def name(self) -> str:
        """What the store is, for messages: "PostgreSQL", "memory"."""
        ...

    record_events: bool
    """Whether each change of a job's state also writes its event (`Jobs(events=...)`)."""

    @property
    def database(self) -> object:
        """Equal for two stores on the same jobs (the DSN; one memory store's data): either can
        write, in one transaction, what the other reserved (`insert_reserved`)."""
        ...

    # -- the schema ----------------------------------------------------------------------------

    async def migrate(self) -> list[str]:
        """Brings the schema up to date; returns the names of the migrations applied."""
        ...

    async def check_schema(self, *, complete: bool) -> None:
        """Raises `SchemaVersionError` for a schema newer than this code, or (with `complete`)
        one that lacks a migration."""
        ...

    # -- producers -----------------------------------------------------------------------------

    async def insert_jobs(self, new: NewJobs, connection: Any | None = None) -> list[int]:
        """Writes the jobs; returns their ids in order. With a unique key a live job already
        holds, or an idempotency key a job of the same name holds (in any status, until it is
        pruned; that holder first), writes nothing and returns that job's id. `connection`: a
        transaction of the caller's to join (PostgreSQL only).

        Raises `IdempotencyKeyReusedError`, writing nothing, if the idempotency key's holder has
        another payload (compared as JSON values: key order aside); a unique key's does not
        matter."""
        ...

    async def reserve_ids(self, new: NewJobs) -> tuple[list[int], bool]:
        """Ids for the jobs of `new`, written later by `insert_reserved` (or never: a gap);
        with a key that a job already holds (as `insert_jobs` decides), that job's id and
        True, and nothing reserved; `IdempotencyKeyReusedError` as `insert_jobs` raises it."""
        ...

    async def insert_reserved(self, batch: Sequence[NewJobs]) -> set[int]:
        """Writes the jobs of `batch` under the ids each `NewJobs.ids` holds, in one go;
        returns the ids written: all of them, or none if a unique or idempotency key of the
        batch is taken by then."""
        ...

    # -- workers -------------------------------------------------------------------------------

    async def claim_batch(
        self,
        queue: str,
        limit: int,
        worker_id: str,
        lease_seconds: float,
        names: Sequence[str] | None = None,
    ) -> list[Claim]:
        """Leases up to `limit` due pending jobs of `queue`, by priority (highest first), then
        `run_at`, then id; each gets a new lease token and one more attempt. With `names`, only
        jobs of those names (the worker's: deploy-aware claiming)."""
        ...

    async def record_outcomes(self, outcomes: Sequence[Outcome]) -> set[int]:
        """Writes the outcomes whose lease token still holds its job; returns their ids."""
        ...

    async def complete_job(
        self, job_id: int, lease_token: UUID, result: str | None, connection: Any | None = None
    ) -> None:
        """Writes the attempt's success (`result`: JSON text or None) as `record_outcomes`
        writes one, its event and the release of the steps waiting for it included, in the
        transaction of `connection` (PostgreSQL only: the caller's, as `insert_jobs` joins it;
        None: at once). `current_job().complete_in`, docs/transactions.md.

        Raises `LeaseLostError`, having written nothing, if `lease_token` no longer holds the
        job running (rescued, released, completed already)."""
        ...

    async def extend_leases(
        self, held: Sequence[tuple[int, UUID]], lease_seconds: float
    ) -> dict[UUID, Renewal]:
        """For each token that still holds its job: whether its lease was renewed (not if the
        row was busy elsewhere), and whether a cancel was requested. A token left out has lost
        its job."""
        ...

    async def record_progress(self, progress: Sequence[tuple[int, UUID, str]]) -> set[int]:
        """Writes each (job id, lease token, JSON text) whose token still holds its job;
        returns their ids."""
        ...

    async def release_jobs(self, held: Sequence[tuple[int, UUID]]) -> set[int]:
        """Gives back, attempt included, the jobs these tokens still hold (shutdown)."""
        ...

    async def release_unknown_claims(
        self, queue: str, worker_id: str, known: Sequence[UUID]
    ) -> list[int]:
        """Gives back, attempt included, the running jobs of `queue` that `worker_id` holds
        under a token not in `known` (a claim whose answer was lost)."""
        ...

    async def rescue_expired(self, limit: int) -> list[tuple[int, str, JobStatus]]:
        """Running jobs whose lease expired: back to pending, or failed with no attempt left.
        Returns (id, queue, new status) of each."""
        ...

    async def prune_finished(self, retention_seconds: float, limit: int) -> int:
        """Deletes up to `limit` jobs finished longer than `retention_seconds` ago."""
        ...

    async def count_unfinished(
        self,
        queues: Sequence[str],
        horizon_seconds: float | None,
        retry_horizon_seconds: float | None,
        names: Sequence[str] | None = None,
    ) -> Unfinished:
        """Jobs of `queues` running, or pending and due within `horizon_seconds` (a retry:
        within `retry_horizon_seconds`; None: any), and the pending jobs due after that. With
        `names`, pending jobs of other names are counted apart (`unknown`)."""
        ...

    async def listen(
        self,
        queues: Sequence[str],
        on_notify: Callable[[str], None],
        on_cancel: Callable[[UUID], None] | None = None,
        on_controls: Callable[[str], None] | None = None,
    ) -> Listener:
        """Calls `on_notify(queue)` when a job of one of `queues` may be due,
        `on_cancel(lease_token)` when a running job is asked to stop (any worker's), and
        `on_controls(queue)` when the controls of a queue (any queue's) changed."""
        ...

    async def listen_for_outcomes(self, on_finished: Callable[[int], None]) -> Listener:
        """Calls `on_finished(job_id)` when a job that `want_outcome` named has finished."""
        ...

    async def want_outcome(self, job_id: int) -> JobStatus | None:
        """Asks to be told (see `listen_for_outcomes`) when the job finishes; returns its
        status now (None: no such job). A job already finished is not announced again."""
        ...

    async def expire_connections(self) -> None:
        """The network looks gone: open new connections on next use (nothing in memory)."""
        ...

    # -- operators and users ---------------------------------------------------------------------

    async def get_job(self, job_id: int) -> JobRecord | None: ...

    async def list_jobs(
        self,
        status: JobStatus | None,
        queue: str | None,
        limit: int,
        name: str | None = None,
        before: int | None = None,
    ) -> list[JobRecord]:
        """Most recent first; of one job name if `name`, with ids below `before` if given."""
        ...

    async def count_by_status(self, queue: str | None) -> dict[JobStatus, int]: ...

    async def job_status(self, job_id: int) -> JobStatus | None: ...

    async def cancel_job(self, job_id: int) -> JobStatus | None:
        """A pending job (or a workflow's waiting step, whose dependents are then told) becomes
        cancelled (returns CANCELLED); a running one is asked to stop, its worker told (returns
        RUNNING); None if it was none of these, or was asked already."""
        ...

    async def peek_jobs(self, queue: str, limit: int, exclude: Sequence[int]) -> list[JobRecord]:
        """The jobs the next claim of `queue` would take, in claim order, writing nothing."""
        ...

    async def job_events(self, job_id: int) -> list[JobEvent]:
        """The job's history, oldest first: its enqueueing, then each event recorded."""
        ...

    async def retry_job(self, job_id: int) -> bool:
        """A failed or cancelled job runs again from its first attempt; False in any other
        status. Raises `UniqueKeyTakenError` if a live job holds its unique key. A workflow's
        step: in the same transaction, the steps waiting for it count it as unfinished again,
        and those its failure cancelled wait again (event `waiting`), down the graph."""
        ...

    async def release_job(self, job_id: int) -> bool:
        """A running job back to pending, attempt given back, whoever holds it."""
        ...

    async def release_worker_jobs(self, worker_id: str) -> list[int]:
        """`release_job` for every job `worker_id` runs; returns their ids."""
        ...

    # -- periodic jobs (docs/schedules.md) ---------------------------------------------------------

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
        schedule are decided one at a time; the job is `scheduled_for` the tick."""
        ...

    async def start_waiting_tick(self, tick: NewTick) -> TickRecord | None:
        """Enqueues the job of the schedule's waiting tick (`overlap="one_waiting"`) once the
        job of the tick before it has finished; `tick` gives the schedule, its hash and the
        job (its time is ignored). Returns the tick, now enqueued, or None."""
        ...

    async def schedule_ticks(self, schedule: str, limit: int) -> list[TickRecord]:
        """The schedule's latest ticks, latest first."""
        ...

    async def prune_ticks(self, keep: int) -> int:
        """Deletes all but each schedule's latest `keep` ticks (a waiting one stays);
        returns how many it deleted."""

    # -- queue controls (docs/limits.md) -------------------------------------------------------

    async def set_paused(self, queue: str, paused: bool) -> None:
        """Pauses (no claim takes its jobs) or resumes `queue`, and tells the workers."""
        ...

    async def declare_queues(self, limits: Mapping[str, QueueLimits]) -> None:
        """A worker starting: the limits of its queues, replacing those declared before (the
        last worker to start wins); the workers are told of each queue whose limits changed."""
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

    # -- the worker registry (docs/workers.md) ---------------------------------------------------

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

    async def rescue_dead_workers(self, limit: int) -> list[tuple[int, str, JobStatus]]:
        """Up to `limit` running jobs of registered workers whose liveness lock is free (their
        process died): back to pending, or failed, or cancelled, as `rescue_expired` decides;
        deletes those workers' rows. Returns (id, queue, new status) of each. In memory: none (a
        dead worker's process took the store with it)."""
        ...

    async def prune_workers(self, missed_heartbeats: float) -> list[str]:
        """Deletes the rows of workers unseen for `missed_heartbeats` of their own heartbeat
        intervals (they died); returns their ids."""
        ...

    # -- workflows (docs/workflows.md) -----------------------------------------------------------

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

    async def get_workflow(self, workflow_id: int) -> WorkflowRecord | None:
        """The workflow and its steps, in the order they were written."""
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

    # -- closing -------------------------------------------------------------------------------

    async def close(self) -> None: ...

    def terminate(self) -> None:
        """Closes at once, without waiting for statements in flight."""
        ...
