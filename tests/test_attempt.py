"""One attempt at one claimed job, judged without a database: what outcome each ending gives."""

from __future__ import annotations

import asyncio
from uuid import uuid4

import pytest

from starlette_jobs import JobStatus, Retry, job
from starlette_jobs._attempt import run_attempt
from starlette_jobs._records import Claim, Outcome
from starlette_jobs._tracing import Tracing


class Gone(Exception):
    pass


@job(retry=Retry.fixed(max_attempts=3, delay=2.0), non_retryable=(Gone,), timeout=0.05)
async def judged(how: str) -> dict[str, str]:
    if how == "fails":
        raise ConnectionError("try again")
    if how == "gone":
        raise Gone("for good")
    if how == "hangs":
        await asyncio.sleep(10)
    if how == "cancels itself":
        raise asyncio.CancelledError
    return {"how": how}


def claim_of(payload: str, *, attempt: int = 1, name: str = judged.name) -> Claim:
    return Claim(
        id=7,
        name=name,
        queue="default",
        payload=payload,
        attempts=attempt,
        max_attempts=3,
        lease_token=uuid4(),
        trace_context=None,
    )


async def attempt(claim: Claim) -> Outcome:
    return await run_attempt(claim, Tracing(), lambda: False)


async def test_a_job_that_returns_succeeds_with_its_result_as_json() -> None:
    claim = claim_of('{"how": "fine"}')
    outcome = await attempt(claim)
    assert (outcome.id, outcome.lease_token) == (claim.id, claim.lease_token)
    assert (outcome.status, outcome.result, outcome.error) == (
        JobStatus.SUCCEEDED,
        '{"how":"fine"}',
        None,
    )


@pytest.mark.parametrize(
    ("how", "attempt_number", "status", "delay", "error"),
    [
        ("fails", 1, JobStatus.PENDING, 2.0, "ConnectionError: try again"),
        ("fails", 3, JobStatus.FAILED, None, "ConnectionError: try again"),  # none left
        ("gone", 1, JobStatus.FAILED, None, "tests.test_attempt.Gone: for good"),  # for good
        ("hangs", 1, JobStatus.PENDING, 2.0, "TimeoutError: job timed out after 0.05 s"),
        ("cancels itself", 1, JobStatus.PENDING, 2.0, "CancelledError: job cancelled"),
    ],
)
async def test_a_failed_attempt_is_retried_or_failed_by_the_policy(
    how: str, attempt_number: int, status: JobStatus, delay: float | None, error: str
) -> None:
    outcome = await attempt(claim_of(f'{{"how": "{how}"}}', attempt=attempt_number))
    assert (outcome.status, outcome.retry_delay, outcome.result) == (status, delay, None)
    assert outcome.error is not None
    assert outcome.error.splitlines()[-1].endswith(error)


async def test_the_error_kept_is_the_whole_traceback() -> None:
    outcome = await attempt(claim_of('{"how": "fails"}'))
    assert outcome.error is not None
    assert outcome.error.startswith("Traceback (most recent call last):")
    assert 'raise ConnectionError("try again")' in outcome.error


async def test_a_row_no_worker_can_run_fails_at_once() -> None:
    unknown = await attempt(claim_of("{}", name="nowhere.to.be.found"))
    invalid = await attempt(claim_of('{"how": 5}'))
    assert (unknown.status, unknown.retry_delay) == (JobStatus.FAILED, None)
    assert "no job named 'nowhere.to.be.found'" in (unknown.error or "")
    assert (invalid.status, invalid.retry_delay) == (JobStatus.FAILED, None)
    assert "JobArgumentsError" in (invalid.error or "")


async def test_an_attempt_the_worker_cancels_has_no_outcome() -> None:
    task = asyncio.create_task(run_attempt(claim_of('{"how": "hangs"}'), Tracing(), lambda: True))
    await asyncio.sleep(0)  # the attempt starts
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
