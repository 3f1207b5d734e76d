"""One attempt at one claimed job, judged without a database: what outcome each ending gives."""

from __future__ import annotations

import asyncio
import threading
from typing import Any
from uuid import uuid4

import pytest

from starlette_jobs import JobStatus, Retry, current_job, job
from starlette_jobs._attempt_records import Claim, Outcome
from starlette_jobs._storable import MAX_ERROR_LENGTH
from starlette_jobs._tracing import Tracing
from starlette_jobs.worker._attempt import CANCEL_REQUESTED, run_attempt
from starlette_jobs.worker._context import AttemptControl
from starlette_jobs.worker._loop_time import JobLoopTime


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
    return await run_attempt(claim, Tracing(), AttemptControl())


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
        ("gone", 1, JobStatus.FAILED, None, "tests.worker.test_attempt.Gone: for good"),  # for good
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


@job(retry=Retry.none())
async def sums(items: list[int]) -> int:
    return sum(items)


async def test_the_error_of_arguments_no_worker_can_run_is_kept_within_the_bound() -> None:
    # One message per invalid item: unbounded, it would hold up the outcomes written with it.
    payload = '{"items": [' + ",".join(['"x"'] * 5000) + "]}"
    invalid = await attempt(claim_of(payload, name=sums.name))
    assert (invalid.status, invalid.retry_delay) == (JobStatus.FAILED, None)
    assert invalid.error is not None
    assert len(invalid.error) <= MAX_ERROR_LENGTH + len("...\n")
    assert invalid.error.startswith("...\n")
    assert invalid.error.endswith(
        "items.4999: Input should be a valid integer, unable to parse string as an integer"
    )


async def test_an_attempt_the_worker_cancels_has_no_outcome() -> None:
    control = AttemptControl()
    task = asyncio.create_task(run_attempt(claim_of('{"how": "hangs"}'), Tracing(), control))
    await asyncio.sleep(0)  # the attempt starts
    control.stopped_by_worker = True
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


# -- cancelled on request (`jobs.cancel` on a running job) -------------------------------------

started: list[asyncio.Event] = []  # the current test's is last (an Event is bound to a loop)
thread_started = threading.Event()


@job(retry=Retry.fixed(max_attempts=3, delay=2.0))
async def long_count(how: str) -> dict[str, Any]:
    """Counts until cancelled; `how` says what it does with the cancellation."""
    count = 0
    started[-1].set()
    while True:
        try:
            await asyncio.sleep(0.001)
            count += 1
        except asyncio.CancelledError:
            if how == "lets it through":
                raise
            if how == "fails instead":
                raise ConnectionError("cleanup failed") from None
            if how == "ignores it":
                await asyncio.sleep(0.01)  # goes on a little, then returns anyway
            return {"counted": count, "cancelling": asyncio.current_task().cancelling()}  # type: ignore[union-attr]


@job(retry=Retry.fixed(max_attempts=3, delay=2.0))
def long_count_in_thread() -> dict[str, int]:
    me = current_job()
    assert me is not None
    count = 0
    thread_started.set()
    while not me.cancel_requested:
        count += 1
    return {"counted": count}


async def cancel_on_request(claim: Claim, *, thread: bool = False) -> Outcome:
    """Runs the attempt, asks it to stop once it runs, as the worker does, and returns its
    outcome."""
    started.append(asyncio.Event())
    thread_started.clear()
    control = AttemptControl()
    task = asyncio.create_task(run_attempt(claim, Tracing(), control))
    if thread:
        await asyncio.to_thread(thread_started.wait, 10)
        control.request_cancel()  # a thread cannot be cancelled: it sees the flag
    else:
        await started[-1].wait()
        control.request_cancel()
        task.cancel(CANCEL_REQUESTED)
    return await task


@pytest.mark.parametrize("how", ["returns partial results", "ignores it"])
async def test_a_job_that_catches_the_cancel_request_ends_cancelled_with_its_result(
    how: str,
) -> None:
    outcome = await cancel_on_request(claim_of(f'{{"how": "{how}"}}', name=long_count.name))
    assert (outcome.status, outcome.retry_delay, outcome.error) == (JobStatus.CANCELLED, None, None)
    assert outcome.result is not None
    assert '"counted":' in outcome.result
    # The job saw the cancellation pending; the worker's code after it is not cancelled.
    assert '"cancelling":1' in outcome.result
    assert asyncio.current_task().cancelling() == 0  # type: ignore[union-attr]


async def test_a_job_cancelled_on_request_is_not_retried_and_says_why() -> None:
    outcome = await cancel_on_request(claim_of('{"how": "lets it through"}', name=long_count.name))
    assert (outcome.status, outcome.retry_delay) == (JobStatus.CANCELLED, None)
    assert outcome.result is None
    assert outcome.error == "cancelled on request"


async def test_a_job_that_fails_while_cancelled_on_request_is_cancelled_with_its_error() -> None:
    outcome = await cancel_on_request(claim_of('{"how": "fails instead"}', name=long_count.name))
    assert (outcome.status, outcome.retry_delay) == (JobStatus.CANCELLED, None)
    assert outcome.result is None
    assert outcome.error is not None
    assert outcome.error.startswith("cancelled on request: Traceback")
    assert outcome.error.endswith("ConnectionError: cleanup failed")


async def test_a_sync_job_sees_the_flag_and_its_result_is_kept() -> None:
    outcome = await cancel_on_request(claim_of("{}", name=long_count_in_thread.name), thread=True)
    assert (outcome.status, outcome.error) == (JobStatus.CANCELLED, None)
    assert outcome.result is not None
    assert outcome.result.startswith('{"counted":')


async def test_a_cancel_the_worker_makes_for_itself_still_wins_over_a_request() -> None:
    """Shutdown or a lost lease: no outcome (the job is released, or another worker has it)."""
    started.append(asyncio.Event())
    control = AttemptControl()
    claim = claim_of('{"how": "lets it through"}', name=long_count.name)
    task = asyncio.create_task(run_attempt(claim, Tracing(), control))
    await started[-1].wait()
    control.request_cancel()
    control.stopped_by_worker = True
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


@job
async def reports(value: Any) -> None:
    me = current_job()
    assert me is not None
    me.report_progress(0.25)
    me.report_progress(value)


async def test_progress_reported_reaches_the_worker_as_json_text() -> None:
    reported: list[str] = []
    claim = claim_of('{"value": {"stage": "upload", "done": [1, 2]}}', name=reports.name)
    outcome = await run_attempt(claim, Tracing(), AttemptControl(reported.append))
    assert outcome.status is JobStatus.SUCCEEDED
    assert reported == ["0.25", '{"stage":"upload","done":[1,2]}']


async def test_progress_that_cannot_be_stored_fails_the_attempt_with_a_clear_error() -> None:
    reported: list[str] = []
    claim = claim_of('{"value": {"name": "a\\u0000b"}}', name=reports.name)
    outcome = await run_attempt(claim, Tracing(), AttemptControl(reported.append))
    assert outcome.status is JobStatus.PENDING
    assert outcome.error is not None
    assert outcome.error.splitlines()[-1] == (
        "ValueError: job 7: progress not storable: name: holds a NUL character (\\x00), "
        "which PostgreSQL cannot store"
    )
    assert reported == ["0.25"]


@job()
def sync_job_that_knows_itself() -> int:
    me = current_job()
    assert me is not None
    return me.id


@job()
async def async_job_that_knows_itself() -> int:
    await asyncio.sleep(0)
    me = current_job()
    assert me is not None
    return me.id


@pytest.mark.parametrize("which", [sync_job_that_knows_itself, async_job_that_knows_itself])
async def test_a_job_timed_for_the_loop_guard_runs_as_it_would_untimed(which: Any) -> None:
    loop_time = JobLoopTime()
    claim = claim_of("{}", name=which.name)
    outcome = await run_attempt(claim, Tracing(), AttemptControl(loop_time=loop_time))
    assert (outcome.status, outcome.result) == (JobStatus.SUCCEEDED, str(claim.id))
    await asyncio.sleep(0)  # a thread's word that it ended reaches the loop
    assert loop_time.threads == 0
    assert loop_time.take() > 0


@job(retry=Retry.none())
async def fails_deep_down(how: str) -> None:
    await asyncio.sleep(0)
    raise ValueError(f"bad {how}")


@job(retry=Retry.none())
def fails_in_a_thread(how: str) -> None:
    raise ValueError(f"bad {how}")


@pytest.mark.parametrize("failing", [fails_deep_down, fails_in_a_thread])
@pytest.mark.parametrize("loop_time", [None, JobLoopTime()])
async def test_the_error_kept_starts_at_the_job_not_at_the_worker(
    failing: Any, loop_time: JobLoopTime | None
) -> None:
    control = AttemptControl(loop_time=loop_time)
    outcome = await run_attempt(claim_of('{"how": "input"}', name=failing.name), Tracing(), control)
    assert outcome.error is not None
    lines = outcome.error.splitlines()
    # What the user reads starts at their job: not at the worker's frames, nor asyncio's, nor
    # the loop-time wrapper's `coroutine.throw`.
    assert lines[0] == "Traceback (most recent call last):"
    assert lines[1].startswith(f'  File "{__file__}"')
    assert "starlette_jobs" not in outcome.error
    assert "asyncio" not in outcome.error
    assert lines[-1] == "ValueError: bad input"


@job(retry=Retry.none())
async def fails_inside_the_library(how: str) -> None:
    me = current_job()
    assert me is not None
    me.report_progress(float("nan"))


async def test_a_frame_of_the_library_that_the_job_called_is_kept() -> None:
    claim = claim_of('{"how": "x"}', name=fails_inside_the_library.name)
    outcome = await attempt(claim)
    assert outcome.error is not None
    assert f'File "{__file__}"' in outcome.error.splitlines()[1]
    assert "_context.py" in outcome.error  # where report_progress refused the value


async def test_an_outcome_says_whether_its_job_may_be_a_workflow_step() -> None:
    # The PostgreSQL store writes successes of no step with a statement without the steps'
    # part: only a claim that says "no workflow" may let it.
    plain = await attempt(claim_of('{"how": "fine"}'))
    step = await attempt(claim_of('{"how": "fine"}')._replace(workflow_id=3))
    failed = await attempt(claim_of('{"how": "gone"}'))
    assert (plain.of_workflow, step.of_workflow, failed.of_workflow) == (False, True, False)
