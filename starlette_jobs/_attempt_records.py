"""What a worker and the store hand each other: a `Claim` the worker took, the `Outcome` of an
attempt (built by `outcome_of_attempt` on the hot path), a lease's `Renewal`, and the jobs still
`Unfinished` that `drain` counts."""

from __future__ import annotations

from dataclasses import FrozenInstanceError, dataclass
from datetime import datetime
from typing import NamedTuple, TypeAlias
from uuid import UUID

from ._records import JobStatus


class Claim(NamedTuple):
    """A job a worker has just leased, under `lease_token`. Its fields are in the order the
    PostgreSQL store's claim returns them.

    Read-only like a frozen dataclass (assigning a field raises `FrozenInstanceError`), but a
    named tuple: one is built per job, in a single call, where a frozen dataclass sets each
    field through `object.__setattr__` (1.04 against 0.48 us)."""

    id: int
    name: str
    queue: str
    payload: str
    attempts: int
    """This attempt's number, from 1."""
    max_attempts: int
    lease_token: UUID
    trace_context: str | None
    scheduled_for: datetime | None = None
    """The tick a schedule enqueued the job for, if one did."""
    workflow_id: int | None = None
    """The workflow the job is a step of, if any (set once, at the job's insert)."""

    def __setattr__(self, name: str, value: object) -> None:
        raise FrozenInstanceError(f"cannot assign to field {name!r}")


@dataclass(slots=True, kw_only=True)
class Outcome:
    """How one attempt ended, to be written under the lease token it was claimed with. Not
    frozen: one is built per attempt, and a frozen dataclass sets each field through
    `object.__setattr__` (twice the cost, 0.6 us of the worker's time per job). Only the
    worker changes one, before handing it to the outcome writer (built by
    `outcome_of_attempt`)."""

    id: int
    lease_token: UUID
    status: JobStatus
    """SUCCEEDED, FAILED, or PENDING for a retry."""
    retry_delay: float | None
    """Seconds until the retry; None unless PENDING."""
    error: str | None
    result: str | None
    """JSON text."""
    progress: str | None = None
    """The last progress the attempt reported that is not written yet (JSON text), if any."""
    of_workflow: bool = True
    """Whether the job may be a workflow's step, whose outcome tells the steps waiting for it:
    False only when its claim said it is none. The PostgreSQL store writes a batch of successes
    of no step with a statement that leaves out the steps' part (`record_plain_successes`)."""


_new_object = object.__new__


def outcome_of_attempt(
    id: int,
    lease_token: UUID,
    status: JobStatus,
    retry_delay: float | None,
    error: str | None,
    result: str | None,
    of_workflow: bool,
) -> Outcome:
    """`Outcome(id=id, ...)` with no progress, for the worker, which builds one per attempt:
    the generated `__init__` called with seven keywords costs 360 ns, these plain stores 115
    (tests/test_records.py holds it equal to the keyword-built one, field for field)."""
    outcome = _new_object(Outcome)
    outcome.id = id
    outcome.lease_token = lease_token
    outcome.status = status
    outcome.retry_delay = retry_delay
    outcome.error = error
    outcome.result = result
    outcome.progress = None
    outcome.of_workflow = of_workflow
    return outcome


@dataclass(frozen=True, slots=True)
class Renewal:
    """What a lease renewal found for one attempt whose token still holds its job."""

    renewed: bool
    """False: not this time, another transaction holds the row locked."""
    cancel_requested: bool
    """`jobs.cancel` asked for the job to stop."""


PruneCursor: TypeAlias = tuple[datetime, int]
"""Where a batch of retention left off: the `(finished_at, id)` of the last old job it looked
at, in that order."""


@dataclass(frozen=True, slots=True)
class Pruned:
    """What one batch of retention did (`Store.prune_finished`)."""

    deleted: int
    """How many finished jobs it deleted, with their events."""
    through: PruneCursor | None
    """Where the next batch starts (`after=`): the last old job this one looked at, deleted or
    kept (a workflow's steps while it runs, a step while a step that waits for it is kept).
    None once it looked at the last old job: the next batch starts from the first again."""


@dataclass(frozen=True, slots=True)
class Unfinished:
    """The unfinished jobs of some queues, as `drain` sees them."""

    waited: int
    """Running, or pending and due within the horizon: what `drain` waits for."""
    scheduled: int
    """First attempts due after the horizon (enqueued with `delay=` or `run_at=`)."""
    retries: int
    """Retries due after the retry horizon."""
    unknown: int = 0
    """Pending jobs whose name this process does not declare: left for a worker that knows
    them (deploy-aware claiming, docs/workers.md)."""
