"""The time bound on both stores: `list_jobs(finished_after=...)` ("the failed jobs of the last
hour"), the bulk retry that keeps the bound in its record, and retention pruning the records of
finished bulk actions."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from starlette_jobs import Jobs, JobStatus
from starlette_jobs._bulk_records import BulkFilter
from starlette_jobs.store._protocol import Store
from tests.contract.test_bulk_contract import failed_jobs
from tests.records import new_jobs as new
from tests.records import outcome as ended

MICROSECOND = timedelta(microseconds=1)


async def older_and_newer(store: Store, **fields: str) -> tuple[list[int], list[int], datetime]:
    """Three jobs failed, then three more; and a time between the two (a bound that takes in
    the second three only)."""
    older = await failed_jobs(store, 3, **fields)
    bound = max(await finished_at(store, older)) + MICROSECOND
    newer = await failed_jobs(store, 3, **fields)
    assert min(await finished_at(store, newer)) >= bound
    return older, newer, bound


async def finished_at(store: Store, ids: list[int]) -> list[datetime]:
    times = []
    for job_id in ids:
        record = await store.get_job(job_id)
        assert record is not None
        assert record.finished_at is not None
        times.append(record.finished_at)
    return times


async def test_the_list_keeps_the_jobs_finished_since_the_bound(store: Store) -> None:
    older, newer, bound = await older_and_newer(store, queue="mail", name="mail.send")
    [pending] = await store.insert_jobs(new(1, queue="mail", name="mail.send"))

    listed = await store.list_jobs(None, "mail", 10, None, None, finished_after=bound)
    assert [job.id for job in listed] == sorted(newer, reverse=True)
    assert pending not in [job.id for job in listed]  # unfinished: no bound matches it
    everything = await store.list_jobs(
        None, "mail", 10, None, None, finished_after=bound - timedelta(hours=1)
    )
    assert [job.id for job in everything] == sorted([*older, *newer], reverse=True)
    # With the other filters, and paged by id.
    page = await store.list_jobs(JobStatus.FAILED, "mail", 2, "mail.send", finished_after=bound)
    assert [job.id for job in page] == sorted(newer, reverse=True)[:2]
    rest = await store.list_jobs(
        JobStatus.FAILED, "mail", 2, "mail.send", page[-1].id, finished_after=bound
    )
    assert [job.id for job in rest] == sorted(newer)[:1]
    # A page past the last match, a bound in the future, other filters: nothing.
    assert await store.list_jobs(None, None, 10, None, min(newer), finished_after=bound) == []
    later = bound + timedelta(hours=1)
    assert await store.list_jobs(None, None, 10, finished_after=later) == []
    assert await store.list_jobs(JobStatus.SUCCEEDED, None, 10, finished_after=bound) == []
    assert await store.list_jobs(None, "other", 10, finished_after=bound) == []


async def test_a_bulk_retry_with_a_bound_retries_only_the_jobs_finished_since(
    store: Store,
) -> None:
    older, newer, bound = await older_and_newer(store, queue="bulk")
    record = await store.begin_bulk("retry", BulkFilter("bulk", finished_after=bound), "ada")
    assert (record.matched, record.finished_after) == (3, bound)
    # One batch, then the process "stops"; the record run on keeps the bound.
    first = await store.bulk_batch(record.id, 2)
    assert first is not None
    assert (first.done, first.finished) == (2, False)
    stored = await store.get_bulk(record.id)
    assert stored is not None
    assert stored.finished_after == bound
    end = await store.bulk_batch(record.id, 2)
    assert end is not None
    assert (end.done, end.finished) == (3, True)
    for job_id in newer:
        assert await store.job_status(job_id) is JobStatus.PENDING
    for job_id in older:
        assert await store.job_status(job_id) is JobStatus.FAILED


async def test_retention_prunes_finished_bulk_records_and_keeps_unfinished_ones(
    store: Store,
) -> None:
    await failed_jobs(store, 2, queue="bulk")
    finished = await store.begin_bulk("retry", BulkFilter("bulk"), "ada")
    assert (await store.bulk_batch(finished.id, 10)) is not None
    unfinished = await store.begin_bulk("cancel", BulkFilter("bulk"), "grace")

    assert await store.prune_bulks(3600.0) == 0  # finished a moment ago: kept
    assert await store.prune_bulks(0.0) == 1
    assert await store.get_bulk(finished.id) is None
    assert [r.id for r in await store.list_bulks(10)] == [unfinished.id]


# -- through `Jobs` ------------------------------------------------------------------------------


@pytest.fixture
async def jobs(postgres_dsn: str | None) -> Jobs:
    return Jobs(postgres_dsn or "memory://", queues={})


async def test_jobs_list_and_run_bulk_apply_the_bound(jobs: Jobs) -> None:
    async with jobs:
        store = jobs._ready_store
        older, newer, bound = await older_and_newer(store, queue="emails", name="send_email")
        listed = await jobs.list(status="failed", name="send_email", finished_after=bound)
        assert [job.id for job in listed] == sorted(newer, reverse=True)
        bulk = await jobs.begin_bulk(
            "retry", queue="emails", status="failed", name="send_email", by="ada",
            finished_after=bound,
        )  # fmt: skip
        end = await jobs.run_bulk(bulk.id, batch_size=1)
        assert end is not None
        assert (end.matched, end.done) == (3, 3)
        assert await jobs.list(status="failed", queue="emails", finished_after=bound) == []
        assert sorted(j.id for j in await jobs.list(status="failed")) == older


async def test_a_job_that_fails_after_a_bulk_retry_began_is_left_out(store: Store) -> None:
    # Enqueued before the retry began (so below its highest id), failed after it: not one of
    # the jobs the operator saw counted, and `done` would pass `matched`.
    [before] = await failed_jobs(store, 1, queue="bulk")
    [later] = await store.insert_jobs(new(1, queue="bulk", max_attempts=1))
    record = await store.begin_bulk("retry", BulkFilter("bulk"), "ada")
    assert record.matched == 1
    [claim] = await store.claim_batch("bulk", 1, "w", 30.0)
    assert claim.id == later
    await store.record_outcomes([ended(claim, JobStatus.FAILED, error="boom")])

    end = await store.bulk_batch(record.id, 10)
    assert end is not None
    assert (end.matched, end.done, end.finished) == (1, 1, True)
    assert await store.job_status(before) is JobStatus.PENDING
    assert await store.job_status(later) is JobStatus.FAILED


async def test_the_bound_takes_in_the_jobs_of_every_queue_and_status(store: Store) -> None:
    """Finished since the bound in three queues, failed, succeeded and cancelled: the list over
    every queue holds them all, and only them."""
    older = await failed_jobs(store, 2, queue="alpha")
    bound = max(await finished_at(store, older)) + MICROSECOND
    newer = await failed_jobs(store, 2, queue="beta")
    newer += await failed_jobs(store, 2, queue="gamma")
    [succeeded] = await store.insert_jobs(new(1, queue="alpha"))
    [claim] = await store.claim_batch("alpha", 1, "w", 30)
    await store.record_outcomes([ended(claim, JobStatus.SUCCEEDED)])
    [cancelled] = await store.insert_jobs(new(1, queue="gamma"))
    assert await store.cancel_job(cancelled) is JobStatus.CANCELLED

    listed = await store.list_jobs(None, None, 20, None, None, finished_after=bound)
    assert [job.id for job in listed] == sorted([*newer, succeeded, cancelled], reverse=True)
