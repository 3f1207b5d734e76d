"""What the store reads for the queue gauges (docs/metrics.md): `QueueDepth`, one per queue."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class QueueDepth:
    """The unfinished jobs of one queue, as one read of the store saw them.

    Attributes:
        queue: the queue's name.
        pending: pending jobs, due now or later.
        due: pending jobs due now (the backlog a worker could claim).
        running: jobs claimed and not finished.
        oldest_due_age: seconds the oldest due pending job has waited since it came due (0
            when none is due): how far the workers lag behind.
    """

    queue: str
    pending: int
    due: int
    running: int
    oldest_due_age: float
