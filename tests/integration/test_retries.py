"""Retry policies as a user sees them: attempts, delays, every error kept, the final status."""

from __future__ import annotations

import itertools
import time

import pytest

from starlette_jobs import JobRecord, Jobs, JobStatus, Retry, current_job, job
from tests.conftest import StartJobs

starts: dict[str, list[float]] = {}


class Flaky(Exception):
    pass


def fails_until(name: str, succeed_on: int | None) -> None:
    """Records when this attempt started; raises unless it is attempt `succeed_on`."""
    running = current_job()
    assert running is not None
    starts.setdefault(name, []).append(time.monotonic())
    if succeed_on is None or running.attempt < succeed_on:
        raise Flaky(f"{name} attempt {running.attempt}")


@job(retry=Retry.fixed(max_attempts=3, delay=0.3))
async def fixed_always_fails() -> None:
    fails_until("fixed", None)


@job(retry=Retry.exponential(max_attempts=4, base_delay=0.1, max_delay=0.3, jitter=0.5))
async def exponential_succeeds_on_4() -> None:
    fails_until("exponential", 4)


@job(retry=Retry.none())
async def no_retry() -> None:
    fails_until("none", None)


@job(retry=Retry.fixed(max_attempts=5, delay=0.05), non_retryable=(PermissionError,))
async def refuses() -> None:
    raise PermissionError("not allowed")


@pytest.fixture(autouse=True)
def _clear() -> None:
    starts.clear()


async def run_one(jobs: Jobs, enqueue: object) -> JobRecord:
    job_id = await enqueue  # type: ignore[misc]
    await jobs.drain(timeout=20)
    stored = await jobs.get(job_id)
    assert stored is not None
    return stored


def gaps(name: str) -> list[float]:
    times = starts[name]
    return [b - a for a, b in itertools.pairwise(times)]


# The worker is woken when a retry comes due; this bounds how late a retry may start on a
# loaded CI machine. The lower bound is exact: a retry never starts before its delay.
LATE = 0.5


async def test_fixed_policy_runs_max_attempts_with_its_delay_and_keeps_every_error(
    start_jobs: StartJobs,
) -> None:
    async with start_jobs() as jobs:
        stored = await run_one(jobs, fixed_always_fails.enqueue())
    assert (stored.status, stored.attempts, stored.max_attempts) == (JobStatus.FAILED, 3, 3)
    assert [e["attempt"] for e in stored.errors] == [1, 2, 3]
    assert all(f"fixed attempt {e['attempt']}" in e["error"] for e in stored.errors)
    assert stored.last_error == stored.errors[-1]["error"]
    for gap in gaps("fixed"):
        assert 0.3 <= gap < 0.3 + LATE


async def test_exponential_policy_backs_off_within_bounds_then_succeeds(
    start_jobs: StartJobs,
) -> None:
    async with start_jobs() as jobs:
        stored = await run_one(jobs, exponential_succeeds_on_4.enqueue())
    assert (stored.status, stored.attempts) == (JobStatus.SUCCEEDED, 4)
    assert [e["attempt"] for e in stored.errors] == [1, 2, 3]
    # base 0.1, doubling, capped at 0.3; jitter 0.5 takes off up to half.
    for gap, full in zip(gaps("exponential"), [0.1, 0.2, 0.3], strict=True):
        assert full * 0.5 <= gap < full + LATE


async def test_none_policy_fails_after_one_attempt(start_jobs: StartJobs) -> None:
    async with start_jobs() as jobs:
        stored = await run_one(jobs, no_retry.enqueue())
    assert (stored.status, stored.attempts, len(stored.errors)) == (JobStatus.FAILED, 1, 1)
    assert "Flaky: none attempt 1" in (stored.last_error or "")
    assert len(starts["none"]) == 1


async def test_a_non_retryable_exception_fails_at_once(start_jobs: StartJobs) -> None:
    async with start_jobs() as jobs:
        stored = await run_one(jobs, refuses.enqueue())
    assert (stored.status, stored.attempts) == (JobStatus.FAILED, 1)
    assert "PermissionError: not allowed" in (stored.last_error or "")


async def test_a_job_waiting_for_its_retry_is_pending_with_a_future_run_at(
    start_jobs: StartJobs,
) -> None:
    @job(retry=Retry.fixed(max_attempts=2, delay=3600))
    async def slow_retry() -> None:
        raise Flaky("later")

    async with start_jobs() as jobs:
        stored = await run_one(jobs, slow_retry.enqueue())
    assert (stored.status, stored.attempts) == (JobStatus.PENDING, 1)
    assert stored.run_at > stored.created_at
    assert stored.errors[0]["error"].endswith("Flaky: later")


async def test_a_job_over_its_timeout_is_cancelled_and_counted_as_a_failed_attempt(
    start_jobs: StartJobs,
) -> None:
    import asyncio

    @job(timeout=0.1, retry=Retry.fixed(max_attempts=2, delay=0.01))
    async def hangs() -> None:
        await asyncio.Event().wait()

    async with start_jobs() as jobs:
        stored = await run_one(jobs, hangs.enqueue())
    assert (stored.status, stored.attempts) == (JobStatus.FAILED, 2)
    assert all("job timed out after 0.1 s" in e["error"] for e in stored.errors)


async def test_a_timeout_error_raised_by_the_job_itself_is_an_ordinary_failure(
    start_jobs: StartJobs,
) -> None:
    @job(timeout=30, retry=Retry.none())
    async def raises_timeout() -> None:
        raise TimeoutError("upstream took too long")

    async with start_jobs() as jobs:
        stored = await run_one(jobs, raises_timeout.enqueue())
    assert stored.status == JobStatus.FAILED
    assert "TimeoutError: upstream took too long" in (stored.last_error or "")
    assert "timed out after" not in (stored.last_error or "")


@job(retry=Retry.fixed(max_attempts=2, delay=0.1))
async def fails_once() -> int:
    running = current_job()
    assert running is not None
    if running.attempt == 1:
        raise Flaky("first try")
    return running.attempt


async def test_a_fresh_workers_first_retry_runs_when_due_not_at_the_next_poll(
    jobs_dsn: str,
) -> None:
    """The worker wakes its queue when a retry comes due: with a 30 s poll, a retry due in
    0.1 s runs within seconds, the first retry of a fresh worker included."""
    async with Jobs(jobs_dsn, poll_interval=30) as jobs:
        began = time.monotonic()
        record = await jobs.wait(await fails_once.enqueue(), timeout=25)
        took = time.monotonic() - began
    assert (record.status, record.attempts, record.result) == (JobStatus.SUCCEEDED, 2, 2)
    assert took < 10, f"the retry waited for the poll: {took:.1f} s"
