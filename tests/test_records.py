"""The records (`_records`): statuses as stored, a row read into a `JobRecord` whatever it
holds, `to_dict` ready for JSON, and `NewJobs` built by keyword only."""

from __future__ import annotations

import dataclasses
import decimal
import json
import logging
from datetime import UTC, datetime
from typing import Any

import pytest

from starlette_jobs import JobRecord, JobStatus
from starlette_jobs._records import NewJobs

CREATED = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def row(**changes: Any) -> dict[str, Any]:
    """A job row as the store reads it: JSON columns as text."""
    return {
        "id": 7,
        "name": "app.send_welcome",
        "queue": "emails",
        "status": "failed",
        "payload": '{"email": "ada@example.com"}',
        "priority": 3,
        "attempts": 2,
        "max_attempts": 2,
        "run_at": CREATED,
        "created_at": CREATED,
        "started_at": CREATED,
        "finished_at": CREATED,
        "last_error": "ConnectionError: CRM unavailable",
        "errors": '[{"attempt": 1, "error": "ConnectionError"}]',
        "worker_id": "host:1:abc",
        "result": None,
        **changes,
    }


def test_statuses_compare_equal_to_their_stored_strings() -> None:
    assert JobStatus("pending") is JobStatus.PENDING
    assert str(JobStatus.FAILED) == "failed"
    assert JobStatus.FAILED in {"failed"}
    assert f"{JobStatus.CANCELLED}" == "cancelled"


def test_a_row_becomes_a_record_with_its_json_decoded() -> None:
    record = JobRecord._from_row(row())
    assert record.status is JobStatus.FAILED
    assert record.arguments == {"email": "ada@example.com"}
    assert record.errors == [{"attempt": 1, "error": "ConnectionError"}]
    assert (record.id, record.name, record.queue, record.priority) == (
        7,
        "app.send_welcome",
        "emails",
        3,
    )
    assert record.result is None


@pytest.mark.parametrize(
    ("stored", "result"), [("null", None), ('"done"', "done"), ("[1, 2]", [1, 2])]
)
def test_a_result_is_decoded(stored: str, result: Any) -> None:
    assert JobRecord._from_row(row(result=stored)).result == result


def test_an_integer_too_long_for_python_comes_back_whole_as_a_decimal() -> None:
    digits = "9" * 5000  # past int()'s default limit of 4300 digits
    record = JobRecord._from_row(row(payload=f'{{"n": {digits}, "small": 1}}'))
    assert record.arguments["n"] == decimal.Decimal(digits)
    assert record.arguments["small"] == 1
    assert type(record.arguments["small"]) is int


def test_json_nested_too_deeply_comes_back_empty_with_a_warning_naming_the_job(
    caplog: pytest.LogCaptureFixture,
) -> None:
    deep = "[" * 100_000 + "]" * 100_000
    with caplog.at_level(logging.WARNING, logger="starlette_jobs"):
        record = JobRecord._from_row(row(payload=deep, errors=deep, result=deep))
    assert (record.arguments, record.errors, record.result) == ({}, [], None)
    assert [r.getMessage() for r in caplog.records] == [
        f"job 7: its {field} cannot be decoded (nested too deeply)"
        for field in ("arguments", "errors", "result")
    ]


def test_to_dict_is_ready_for_json_with_iso_timestamps() -> None:
    data = JobRecord._from_row(row(finished_at=None)).to_dict()
    assert data["status"] == "failed"
    assert data["created_at"] == "2026-01-02T03:04:05+00:00"
    assert data["finished_at"] is None
    assert data["arguments"] == {"email": "ada@example.com"}
    assert set(data) == {field.name for field in dataclasses.fields(JobRecord)}
    assert json.loads(json.dumps(data)) == data


def test_new_jobs_are_built_by_keyword_only() -> None:
    with pytest.raises(TypeError):
        NewJobs("n", "q", [], 0, None, None, 1, None, None, True)  # type: ignore[call-arg]
