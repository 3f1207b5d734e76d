"""`StatusCounts`: what a count past the cap reads as, to people and in JSON."""

from __future__ import annotations

from starlette_jobs import JobStatus
from starlette_jobs._count_records import capped_counts


def test_counts_read_past_the_cap_show_the_cap_and_a_plus() -> None:
    counts = capped_counts({JobStatus.SUCCEEDED: 10_001, JobStatus.FAILED: 7}, 10_000)
    assert counts.capped == {JobStatus.SUCCEEDED}
    assert counts.shown("succeeded") == "10,000+"
    assert counts.shown(JobStatus.FAILED) == "7"
    assert counts["pending"] == 0
    assert counts.to_dict() == {
        "counts": {
            "pending": 0, "running": 0, "succeeded": 10_000, "failed": 7, "cancelled": 0,
            "waiting": 0,
        },
        "cap": 10_000,
        "capped": ["succeeded"],
    }  # fmt: skip


def test_unfinished_statuses_are_never_capped() -> None:
    counts = capped_counts({JobStatus.PENDING: 50}, 10)
    assert (counts.shown("pending"), counts.capped) == ("50", frozenset())
