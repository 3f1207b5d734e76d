"""A job's history as `jobs.events` returns it, from the rows the `job_events` statement reads.

What the job row says is read from it, not written as events: its enqueueing, the claim of the
attempt running now, and a success with its attempt's claim (nothing changes a job after it
succeeded). The other ends of an attempt are events that carry its claim (`claimed_at` and
`claimed_attempt`, migration 0017). A job that succeeds at once then writes no event row at all,
where it wrote two: one row less on each of a worker's two hottest statements. Where each claim
goes: `store/_history.py`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from .._records import EventKind, JobEvent
from ..store._history import claim_event, place_claim

FROM_THE_ROW = 2**63 - 1
"""The `seq` of the statement's last row: what the job row says of its last attempt."""


def job_history(rows: Iterable[Mapping[str, Any]]) -> list[JobEvent]:
    """The events of `rows` (in the statement's order) with each attempt's claim in place."""
    events: list[JobEvent] = []
    for row in rows:
        if row["seq"] == FROM_THE_ROW and events and events[-1].kind is EventKind.SUCCEEDED:
            break  # its success was written as an event (before migration 0017): told once
        if row["claimed_at"] is not None:  # an attempt's end, or the running attempt's claim
            claim = claim_event(
                row["job_id"], row["claimed_at"], row["claimed_attempt"], row["worker_id"],
                row["workflow_id"],
            )  # fmt: skip
            place_claim(events, claim)
        if row["kind"] is not None:  # else the row is the running attempt's claim alone
            events.append(JobEvent._from_row(row))
    return events
