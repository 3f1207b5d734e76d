"""A job's history as `jobs.events` returns it, from the rows the `job_events` statement reads.

A claim writes no event row of its own (migration 0017): each attempt's `claimed` event is
read from the event that ends the attempt (its `claimed_at` and `claimed_attempt`), or, while
the attempt runs, from the job row, as `enqueued` is read from the job row. A claim is then
one row written, the job's, where it was two, on the hottest statement of a worker.

Each claim goes before the events of its attempt. The only events an attempt has before its
end are requests to stop it (`cancel_requested`), which leave the job running: the claim goes
before the run of `running` events that precedes its attempt's end.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from starlette_jobs._records import EventKind, JobEvent, JobStatus


def job_history(rows: Iterable[Mapping[str, Any]], running_claim: bool) -> list[JobEvent]:
    """The events of `rows` (in the statement's order) with each attempt's claim in place.
    `running_claim`: whether to tell the claim of the attempt running now (the reader's
    `events` setting: a `Jobs(events=False)` tells only `enqueued`)."""
    events: list[JobEvent] = []
    for row in rows:
        ended = row["kind"] is not None  # else the row is the running attempt's claim
        if row["claimed_at"] is not None and (ended or running_claim):
            _place_claim(events, row)
        if ended:
            events.append(JobEvent._from_row(row))
    return events


def _place_claim(events: list[JobEvent], row: Mapping[str, Any]) -> None:
    position = len(events)
    while position and events[position - 1].status is JobStatus.RUNNING:
        if events[position - 1].kind is EventKind.CLAIMED:
            return  # claimed before migration 0017, which wrote the claim as a row of its own
        position -= 1
    claim = JobEvent(
        job_id=row["job_id"],
        kind=EventKind.CLAIMED,
        at=row["claimed_at"],
        status=JobStatus.RUNNING,
        attempt=row["claimed_attempt"],
        worker_id=row["worker_id"],
        workflow_id=row["workflow_id"],
    )
    events.insert(position, claim)
