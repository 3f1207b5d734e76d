"""The in-memory store's rows (`_memory_rows`): a release that a cancel request turns into the
end of the job, and the history a row keeps. The store's semantics as a whole are the contract
suite's (tests/contract/)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from uuid import uuid4

from starlette_jobs import JobStatus
from starlette_jobs._records import EventKind
from starlette_jobs.memory._rows import Row

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)


def running_row() -> Row:
    return Row(
        id=7,
        name="tests.jobs",
        queue="default",
        payload="{}",
        priority=0,
        run_at=NOW - timedelta(minutes=1),
        max_attempts=3,
        trace_context=None,
        unique_key=None,
        created_at=NOW - timedelta(minutes=2),
        status=JobStatus.RUNNING,
        attempts=2,
        lease_token=uuid4(),
        lease_expires_at=NOW + timedelta(seconds=30),
        worker_id="w",
    )


def test_a_release_gives_the_attempt_back_and_makes_the_job_due_now() -> None:
    row = running_row()
    assert row.give_back(NOW) is EventKind.RELEASED
    assert (row.status, row.attempts, row.run_at, row.finished_at) == (
        JobStatus.PENDING,
        1,
        NOW,
        None,
    )
    assert (row.lease_token, row.lease_expires_at) == (None, None)


def test_a_release_of_a_job_asked_to_stop_ends_it_cancelled() -> None:
    row = running_row()
    row.cancel_requested_at = NOW
    assert row.give_back(NOW) is EventKind.CANCELLED
    assert (row.status, row.finished_at, row.lease_token) == (JobStatus.CANCELLED, NOW, None)


def test_the_history_starts_with_the_enqueueing_and_each_event_keeps_the_state_after_it() -> None:
    row = running_row()
    row.log(EventKind.CLAIMED, NOW)
    row.give_back(NOW)
    row.log(EventKind.RELEASED, NOW)
    history = row.history()
    assert [(e.kind, e.status, e.attempt, e.run_at) for e in history] == [
        (EventKind.ENQUEUED, JobStatus.PENDING, 0, None),
        (EventKind.CLAIMED, JobStatus.RUNNING, 2, None),
        (EventKind.RELEASED, JobStatus.PENDING, 1, NOW),
    ]
    assert history[0].at == row.created_at
    assert [e.worker_id for e in history] == [None, "w", "w"]
    assert history[1].to_dict()["kind"] == "claimed"


def test_a_row_reads_back_as_the_record_users_get() -> None:
    row = running_row()
    row.progress = '{"done": 3}'
    record = row.record()
    assert (record.id, record.status, record.progress, record.arguments) == (
        7,
        JobStatus.RUNNING,
        {"done": 3},
        {},
    )
    assert not record.finished
