"""The records of workflows: a `WorkflowRecord` looked up by step, its statuses, and whether it
has finished."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from starlette_jobs import JobRecord, JobStatus
from starlette_jobs._workflow_records import workflow_record

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def step_job(job_id: int, step: str, status: JobStatus) -> JobRecord:
    return JobRecord(
        id=job_id, name="j", queue="q", status=status, arguments={}, priority=0, attempts=0,
        max_attempts=1, run_at=NOW, created_at=NOW, started_at=None, finished_at=None,
        last_error=None, errors=[], worker_id=None, result=job_id, workflow_id=1, step=step,
    )  # fmt: skip


def test_a_workflow_names_what_each_step_waits_for() -> None:
    jobs = [step_job(10, "a", JobStatus.SUCCEEDED), step_job(11, "b", JobStatus.WAITING)]
    upstream = {10: [], 11: [10, 99]}  # 99: a step no longer kept
    record = workflow_record(1, "w", NOW, jobs, lambda job: upstream[job.id])
    assert record["b"].waits_for == ("a", "99")
    assert record["a"].result == 10
    assert record.statuses == {"a": JobStatus.SUCCEEDED, "b": JobStatus.WAITING}
    assert not record.finished
    with pytest.raises(KeyError):
        record["c"]


def test_a_workflow_has_finished_once_every_step_has() -> None:
    jobs = [step_job(10, "a", JobStatus.SUCCEEDED), step_job(11, "b", JobStatus.CANCELLED)]
    record = workflow_record(1, "w", NOW, jobs, lambda job: [])
    assert record.finished
