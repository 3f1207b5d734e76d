"""A job's history as `jobs.events` returns it, from the rows the `job_events` statement reads.

A claim writes no event row of its own (migration 0017): each attempt's `claimed` event is
read from the event that ends the attempt (its `claimed_at` and `claimed_attempt`), or, while
the attempt runs, from the job row, as `enqueued` is read from the job row. A claim is then
one row written, the job's, where it was two, on the hottest statement of a worker. Where
each claim goes: `store/_history.py`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from .._records import JobEvent
from ..store._history import claim_event, place_claim


def job_history(rows: Iterable[Mapping[str, Any]]) -> list[JobEvent]:
    """The events of `rows` (in the statement's order) with each attempt's claim in place."""
    events: list[JobEvent] = []
    for row in rows:
        if row["claimed_at"] is not None:  # an attempt's end, or the running attempt's claim
            claim = claim_event(
                row["job_id"], row["claimed_at"], row["claimed_attempt"], row["worker_id"],
                row["workflow_id"],
            )  # fmt: skip
            place_claim(events, claim)
        if row["kind"] is not None:  # else the row is the running attempt's claim alone
            events.append(JobEvent._from_row(row))
    return events
