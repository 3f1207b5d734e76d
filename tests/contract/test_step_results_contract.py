"""A workflow's step whose result cannot be stored (docs/workflows.md), on PostgreSQL and memory
alike: it fails like any job (retried by its policy, then failed), and the steps waiting for it
are cancelled naming it; it never succeeds with no result, and nothing is left waiting."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pydantic
import pytest

from starlette_jobs import EventKind, Jobs, JobStatus, Retry, Workflow, job

attempts: list[str] = []


@pytest.fixture(autouse=True)
def _fresh() -> None:
    attempts.clear()


@pytest.fixture
async def jobs(jobs_dsn: str) -> AsyncIterator[Jobs]:
    async with Jobs(jobs_dsn, poll_interval=0.05, queues={"default": 4}) as started:
        yield started


class Refusing(pydantic.BaseModel):
    value: int

    @pydantic.field_serializer("value")
    def _refuse(self, value: int) -> int:
        raise ValueError("this value cannot be written")


@job(name="wf.unstorable", retry=Retry.fixed(max_attempts=2, delay=0))
async def unstorable(kind: str) -> object:
    attempts.append(kind)
    if kind == "not json":
        return {"at": object()}
    if kind == "serializer":
        return Refusing(value=1)
    return {"text": "nul \x00"}


@job(name="wf.after_unstorable")
async def after_unstorable() -> str:
    attempts.append("after")
    return "ran"


@pytest.mark.parametrize("kind", ["not json", "serializer", "unstorable text"])
async def test_a_step_whose_result_cannot_be_stored_fails_and_cancels_what_waits(
    jobs: Jobs, kind: str
) -> None:
    flow = Workflow("unstorable")
    fetched = flow.add("fetch", unstorable, kind=kind)
    flow.after(fetched).add("use", after_unstorable)
    flow.after(fetched, always=True).add("cleanup", after_unstorable)
    enqueued = await flow.enqueue()
    await jobs.drain(timeout=10)
    record = await jobs.workflow(enqueued.id)
    assert record is not None
    assert record.statuses == {
        "fetch": JobStatus.FAILED,
        "use": JobStatus.CANCELLED,
        "cleanup": JobStatus.SUCCEEDED,
    }
    assert attempts == [kind, kind, "after"]  # retried by its policy, then failed
    fetch = record["fetch"].job
    assert fetch.result is None
    assert fetch.last_error is not None
    assert "UnstorableResultError: the step's result cannot be stored" in fetch.last_error
    assert len(fetch.errors) == 2
    events = await jobs.events(enqueued.steps["use"])
    assert events[-1].kind is EventKind.CANCELLED
    assert events[-1].error == (
        f"cancelled: it waits for step fetch (job {enqueued.steps['fetch']}) failed"
    )


async def test_a_job_of_no_workflow_still_succeeds_without_its_result(jobs: Jobs) -> None:
    """Unchanged for a job of no workflow (docs/jobs-and-retries.md): nothing waits for its
    result, and running it again would redo its work to return the same value."""
    job_id = await unstorable.enqueue(kind="not json")
    await jobs.drain(timeout=10)
    record = await jobs.get(job_id)
    assert record is not None
    assert (record.status, record.result, attempts) == (JobStatus.SUCCEEDED, None, ["not json"])
