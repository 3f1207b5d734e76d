"""A bulk action's filter (the statuses each action changes) and its record as JSON."""

from __future__ import annotations

from datetime import UTC, datetime

from starlette_jobs import BulkRecord, JobStatus
from starlette_jobs._bulk_records import BulkFilter


def test_each_action_changes_its_statuses_narrowed_by_the_filter() -> None:
    assert BulkFilter("q").statuses("retry") == ["cancelled", "failed"]
    assert BulkFilter("q").statuses("cancel") == ["pending", "running", "waiting"]
    assert BulkFilter("q", JobStatus.FAILED).statuses("retry") == ["failed"]
    # A status the action does not change: nothing matches.
    assert BulkFilter("q", JobStatus.SUCCEEDED).statuses("retry") == []


def test_a_record_as_json_and_its_filter() -> None:
    started = datetime(2026, 11, 26, 6, 0, tzinfo=UTC)
    record = BulkRecord(
        id=1, action="retry", by="ada", queue="emails", status=JobStatus.FAILED,
        name="app.send_email", started_at=started, finished_at=None, matched=10, done=4,
        last_id=40, upper_id=100,
    )  # fmt: skip
    assert record.finished is False
    assert record.filter == BulkFilter("emails", JobStatus.FAILED, "app.send_email")
    data = record.to_dict()
    assert (data["status"], data["started_at"], data["finished_at"]) == (
        "failed",
        "2026-11-26T06:00:00+00:00",
        None,
    )
