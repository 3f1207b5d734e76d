"""Where an attempt's `claimed` event goes in a job's history, when it is read from elsewhere
than an event of its own: on PostgreSQL from the event that ends the attempt
(`postgres/_history.py`); on both stores from the job row, for the attempt running now and for
the last one of a job that succeeded, whether or not the claim was recorded (docs/events.md).

A claim goes right before the events its attempt had before its end: requests to stop it
(`cancel_requested`), which leave the job running, carry its attempt number and come after it.
"""

from __future__ import annotations

from datetime import datetime

from .._records import EventKind, JobEvent, JobStatus


def claim_event(
    job_id: int, at: datetime, attempt: int, worker_id: str | None, workflow_id: int | None
) -> JobEvent:
    """The `claimed` event of the attempt `attempt`, claimed at `at` by `worker_id`."""
    return JobEvent(
        job_id=job_id,
        kind=EventKind.CLAIMED,
        at=at,
        status=JobStatus.RUNNING,
        attempt=attempt,
        worker_id=worker_id,
        workflow_id=workflow_id,
    )


def place_claim(events: list[JobEvent], claim: JobEvent) -> None:
    """Inserts `claim` into `events` (a history, oldest first, up to the end of the claim's
    attempt) before the events of its attempt, unless it is there already (a claim recorded as
    an event of its own: on PostgreSQL before migration 0017, in memory when it was made)."""
    position = len(events)
    while position:
        before = events[position - 1]
        if (
            before.status is not JobStatus.RUNNING
            or before.attempt != claim.attempt
            or before.at < claim.at
        ):
            break  # an event of an earlier attempt, or of the time before this claim
        if before.kind is EventKind.CLAIMED and before.at == claim.at:
            return
        position -= 1
    events.insert(position, claim)
