"""`jobs.status_counts` (the dashboard's overview, `starlette-jobs status`) on both stores: the
unfinished statuses counted exactly, each finished status up to the cap and marked past it, per
queue or over all of them."""

from __future__ import annotations

import pytest

from starlette_jobs import Jobs, JobStatus, StatusCounts, Workflow, job
from starlette_jobs.store._protocol import Store
from tests.records import new_jobs, outcome


@job(queue="counted")
async def first_step() -> None:
    pass


@job(queue="counted")
async def second_step() -> None:
    pass


async def _mail_and_sms(store: Store) -> None:
    """mail: 1 pending, 1 running, 3 succeeded, 1 failed, 1 cancelled; sms: 2 pending."""
    await store.insert_jobs(new_jobs(6, queue="mail"))
    claims = await store.claim_batch("mail", 5, "w", 30)
    finished = [outcome(claim, JobStatus.SUCCEEDED) for claim in claims[:3]]
    finished.append(outcome(claims[3], JobStatus.FAILED))
    assert len(await store.record_outcomes(finished)) == 4
    [cancelled] = await store.insert_jobs(new_jobs(1, queue="mail", delay=3600))
    assert await store.cancel_job(cancelled) is JobStatus.CANCELLED
    await store.insert_jobs(new_jobs(2, queue="sms"))


async def test_below_the_cap_every_count_is_exact(store: Store) -> None:
    await _mail_and_sms(store)
    counts = await store.status_counts("mail", 10)
    assert dict(counts.counts) == {
        JobStatus.PENDING: 1, JobStatus.RUNNING: 1, JobStatus.WAITING: 0,
        JobStatus.SUCCEEDED: 3, JobStatus.FAILED: 1, JobStatus.CANCELLED: 1,
    }  # fmt: skip
    assert counts.capped == frozenset()
    assert dict(counts.counts) == await store.count_by_status("mail")
    everywhere = await store.status_counts(None, 10)
    assert everywhere[JobStatus.PENDING] == 3
    assert dict(everywhere.counts) == await store.count_by_status(None)


async def test_a_finished_status_past_the_cap_reads_as_the_cap_and_more(store: Store) -> None:
    await _mail_and_sms(store)
    counts = await store.status_counts("mail", 2)
    assert counts.capped == {JobStatus.SUCCEEDED}
    assert (counts[JobStatus.SUCCEEDED], counts.shown(JobStatus.SUCCEEDED)) == (2, "2+")
    assert (counts[JobStatus.FAILED], counts.shown(JobStatus.FAILED)) == (1, "1")
    # A count exactly at the cap is exact: only one past it is capped.
    assert (await store.status_counts("mail", 3)).capped == frozenset()
    # The unfinished statuses are never capped.
    many = await store.status_counts(None, 1)
    assert (many[JobStatus.PENDING], many.capped) == (3, frozenset({JobStatus.SUCCEEDED}))


async def test_a_queue_with_no_job_counts_zero_in_every_status(store: Store) -> None:
    await _mail_and_sms(store)
    counts = await store.status_counts("nothing-here", 10)
    assert dict(counts.counts) == dict.fromkeys(JobStatus, 0)


async def test_waiting_steps_are_counted_per_queue(jobs_dsn: str) -> None:
    async with Jobs(jobs_dsn, queues={}) as jobs:
        flow = Workflow("counted")
        flow.after(flow.add("first", first_step)).add("second", second_step)
        await flow.enqueue(jobs=jobs)
        counts = await jobs.status_counts(queue="counted")
        assert (counts["pending"], counts["waiting"]) == (1, 1)
        assert await jobs.count_by_status(queue="counted") == dict(counts.counts)
        assert await jobs.count_by_status() == dict(counts.counts)
        assert isinstance(counts, StatusCounts)
        assert counts.cap == 10_000


@pytest.mark.parametrize("cap", [0, -5])
async def test_a_cap_below_one_is_refused(jobs_dsn: str, cap: int) -> None:
    async with Jobs(jobs_dsn, queues={}) as jobs:
        with pytest.raises(ValueError, match="cap must be at least 1"):
            await jobs.status_counts(cap=cap)
