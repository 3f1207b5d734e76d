"""What `jobs.status_counts` returns: `StatusCounts`, the jobs of each status, the finished ones
counted up to a cap so that the read does not grow with the table (docs/dashboard.md)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ._records import FINISHED, JobStatus

DEFAULT_COUNT_CAP = 10_000
"""Finished jobs counted per status before a count shows as "10,000+"."""


@dataclass(frozen=True, slots=True)
class StatusCounts:
    """How many jobs there are in each status, of one queue or of all.

    The unfinished statuses (pending, running, waiting) are counted exactly: there are as many as
    the backlog. A finished status (succeeded, failed, cancelled) is counted up to `cap`: past it,
    its count is `cap` and the status is in `capped`, read as "at least `cap`". So the read costs
    at most `cap` rows per finished status, however many millions the table keeps.

    Attributes:
        counts: every status, zeros included.
        cap: how far a finished status is counted.
        capped: the finished statuses with `cap` jobs or more.
    """

    counts: Mapping[JobStatus, int]
    cap: int
    capped: frozenset[JobStatus] = frozenset()

    def __getitem__(self, status: JobStatus | str) -> int:
        return self.counts[JobStatus(status)]

    def shown(self, status: JobStatus | str) -> str:
        """The count as people read it: `1,234`, or `10,000+` for a capped one."""
        status = JobStatus(status)
        return f"{self.counts[status]:,}" + ("+" if status in self.capped else "")

    def to_dict(self) -> dict[str, object]:
        """For JSON: `counts` by status name, `cap`, and the `capped` statuses' names."""
        return {
            "counts": {status.value: count for status, count in self.counts.items()},
            "cap": self.cap,
            "capped": sorted(status.value for status in self.capped),
        }


def capped_counts(counted: Mapping[JobStatus, int], cap: int) -> StatusCounts:
    """The `StatusCounts` of counts that read at most `cap + 1` jobs of each finished status
    (the one past the cap tells that there are more)."""
    counts = {status: counted.get(status, 0) for status in JobStatus}
    capped = frozenset(status for status in FINISHED if counts[status] > cap)
    for status in capped:
        counts[status] = cap
    return StatusCounts(counts, cap, capped)
