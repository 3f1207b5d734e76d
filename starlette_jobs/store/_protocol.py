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

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, Protocol
from uuid import UUID

from .._attempt_records import Claim, Outcome, PruneCursor, Pruned, Renewal, Unfinished
from .._count_records import StatusCounts
from .._records import JobEvent, JobRecord, JobStatus, NewJobs
from ._bulk import BulkStore
from ._listener import Listener as Listener  # where the rest of the library finds it
from ._parts import ControlStore, RegistryStore, ScheduleStore, WorkflowStore
from ._throughput import ThroughputStore


class Store(
    ScheduleStore, ControlStore, RegistryStore, WorkflowStore, BulkStore, ThroughputStore, Protocol
):
    """Where jobs are kept; see the module's docstring. The parts beyond jobs (periodic jobs,
    queue controls, the worker registry, workflows) are declared in `_parts.py`."""

    @property
    def name(self) -> str:
        """What the store is, for messages: "PostgreSQL", "memory"."""
        ...

    record_events: bool
    """Whether each change of a job's state also writes its event (`Jobs(events=...)`)."""

    @property
    def database(self) -> object:
        """Equal for two stores on the same jobs (the DSN and the schema; one memory store's
        data): either can write, in one transaction, what the other reserved
        (`insert_reserved`)."""
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

    async def locked_jobs(self, ids: Sequence[int]) -> set[int]:
        """Of `ids`, the jobs whose outcome would wait for a row another transaction holds
        locked now (the job's own, or that of a step waiting for it), without waiting for any
        lock: an outcome write that ran out of time writes the others without them."""
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

    async def prune_finished(
        self, retention_seconds: float, limit: int, after: PruneCursor | None = None
    ) -> Pruned:
        """Looks at the next `limit` jobs finished longer than `retention_seconds` ago, by
        `(finished_at, id)`, after `after` if given (the last batch's `through`), and deletes
        those not kept (steps of a running workflow, a step that a kept step waits for)."""
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
        trace_id: str | None = None,
        correlation_id: str | None = None,
        finished_after: datetime | None = None,
        after: int | None = None,
        brief: bool = False,
    ) -> list[JobRecord]:
        """Most recent first; of one job name if `name`, with ids below `before` and above
        `after` if given, of one trace (lowercase hex) and one correlation id if given, and
        only jobs finished at or after `finished_after` if given. `brief`: what a list of jobs
        shows, read without the large fields (a store may leave `arguments` empty, `errors`
        empty, `result` and `progress` None, and `last_error` its last line alone)."""
        ...

    async def count_by_status(self, queue: str | None) -> dict[JobStatus, int]: ...

    async def status_counts(self, queue: str | None, cap: int) -> StatusCounts:
        """The jobs of each status, of `queue` or of all: the unfinished ones exactly, each
        finished status up to `cap` (see `StatusCounts`), reading at most `cap + 1` finished
        jobs per status whatever the size of the table."""
        ...

    async def job_status(self, job_id: int) -> JobStatus | None: ...

    async def cancel_job(self, job_id: int, by: str | None = None) -> JobStatus | None:
        """A pending job (or a workflow's waiting step, whose dependents are then told) becomes
        cancelled (returns CANCELLED); a running one is asked to stop, its worker told (returns
        RUNNING); None if it was none of these, or was asked already. `by`: who asked, written
        in the event (its `by`), as for `retry_job` and `release_job`."""
        ...

    async def peek_jobs(self, queue: str, limit: int, exclude: Sequence[int]) -> list[JobRecord]:
        """The jobs the next claim of `queue` would take, in claim order, writing nothing."""
        ...

    async def job_events(self, job_id: int) -> list[JobEvent]:
        """The job's history, oldest first: its enqueueing, then each event recorded."""
        ...

    async def retry_job(self, job_id: int, by: str | None = None) -> bool:
        """A failed or cancelled job runs again from its first attempt; False in any other
        status. Raises `UniqueKeyTakenError` if a live job holds its unique key. A workflow's
        step: in the same transaction, the steps waiting for it count it as unfinished again,
        and those its failure cancelled wait again (event `waiting`), down the graph."""
        ...

    async def release_job(self, job_id: int, by: str | None = None) -> bool:
        """A running job back to pending, attempt given back, whoever holds it."""
        ...

    async def release_worker_jobs(self, worker_id: str) -> list[int]:
        """`release_job` for every job `worker_id` runs; returns their ids."""
        ...

    # -- closing -------------------------------------------------------------------------------

    async def close(self) -> None: ...

    def terminate(self) -> None:
        """Closes at once, without waiting for statements in flight."""
        ...
