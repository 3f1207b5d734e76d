"""Bulk actions (docs/dashboard.md, "Bulk actions") on both stores: the record, the batches by
id that change their jobs, write their events and advance it, and what they leave alone."""

from __future__ import annotations

import pytest

from starlette_jobs import Jobs, JobStatus
from starlette_jobs._bulk_records import BulkFilter
from starlette_jobs._records import EventKind
from starlette_jobs._workflow_records import NewStep, NewWorkflow
from starlette_jobs.store._protocol import Store
from tests.records import new_jobs as new
from tests.records import outcome as ended

LEASE = 30.0


async def failed_jobs(store: Store, count: int, **fields: str) -> list[int]:
    """`count` jobs of `fields` (queue, name, unique_key), each failed for good."""
    ids = await store.insert_jobs(new(count, max_attempts=1, **fields))  # type: ignore[arg-type]
    queue = fields.get("queue", "default")
    claims = await store.claim_batch(queue, count, "w", LEASE)
    assert sorted(c.id for c in claims) == ids
    await store.record_outcomes([ended(c, JobStatus.FAILED, error="boom") for c in claims])
    return ids


async def test_a_bulk_retry_runs_in_batches_by_id_and_counts_as_it_goes(store: Store) -> None:
    retried = await failed_jobs(store, 5, queue="bulk", name="tests.send")
    other_name = await failed_jobs(store, 1, queue="bulk", name="tests.other")
    other_queue = await failed_jobs(store, 1, queue="elsewhere", name="tests.send")
    [pending] = await store.insert_jobs(new(1, queue="bulk", name="tests.send", delay=3600))

    record = await store.begin_bulk("retry", BulkFilter("bulk", name="tests.send"), "ada")
    assert (record.action, record.by, record.queue, record.name) == (
        "retry",
        "ada",
        "bulk",
        "tests.send",
    )
    assert (record.matched, record.done, record.finished) == (5, 0, False)
    later = await failed_jobs(store, 1, queue="bulk", name="tests.send")  # after it began

    progress = []
    while (batch := await store.bulk_batch(record.id, 2)) is not None:
        progress.append((batch.done, batch.finished))
        if batch.finished:
            break
    assert progress == [(2, False), (4, False), (5, True)]
    assert await store.bulk_batch(record.id, 2) is None  # finished: nothing more to do
    for job_id in retried:
        assert await store.job_status(job_id) is JobStatus.PENDING
        last = (await store.job_events(job_id))[-1]
        assert (last.kind, last.by) == (EventKind.RETRIED, "ada")
    for job_id in (*other_name, *other_queue, *later):
        assert await store.job_status(job_id) is JobStatus.FAILED
    assert await store.job_status(pending) is JobStatus.PENDING

    stored = await store.get_bulk(record.id)
    assert stored is not None
    assert (stored.done, stored.matched, stored.finished) == (5, 5, True)
    assert [r.id for r in await store.list_bulks(10)] == [record.id]


async def test_a_bulk_cancel_cancels_pending_jobs_and_asks_running_ones_to_stop(
    store: Store,
) -> None:
    [done] = await failed_jobs(store, 1, queue="bulk")
    running, pending = await store.insert_jobs(new(2, queue="bulk"))
    await store.claim_batch("bulk", 1, "w", LEASE)
    record = await store.begin_bulk("cancel", BulkFilter("bulk"), "grace")
    assert record.matched == 2
    after = await store.bulk_batch(record.id, 500)
    assert after is not None
    assert (after.done, after.finished) == (2, True)
    assert await store.job_status(pending) is JobStatus.CANCELLED
    assert (await store.job_events(pending))[-1].by == "grace"
    assert (await store.job_events(running))[-1].kind is EventKind.CANCEL_REQUESTED
    assert await store.job_status(done) is JobStatus.FAILED


async def test_a_filter_by_status_narrows_what_the_action_applies_to(store: Store) -> None:
    [failed] = await failed_jobs(store, 1, queue="bulk")
    [cancelled] = await store.insert_jobs(new(1, queue="bulk"))
    await store.cancel_job(cancelled)
    record = await store.begin_bulk("retry", BulkFilter("bulk", JobStatus.CANCELLED), None)
    assert record.matched == 1
    assert await store.bulk_batch(record.id, 10) is not None
    assert await store.job_status(cancelled) is JobStatus.PENDING
    assert await store.job_status(failed) is JobStatus.FAILED
    assert (await store.job_events(cancelled))[-1].by is None


async def test_a_job_whose_unique_key_is_taken_is_left_failed(store: Store) -> None:
    [taken] = await failed_jobs(store, 1, queue="bulk", unique_key="report-7")
    [free] = await failed_jobs(store, 1, queue="bulk", unique_key="report-8")
    [holder] = await store.insert_jobs(new(1, queue="other", unique_key="report-7"))
    record = await store.begin_bulk("retry", BulkFilter("bulk"), "ada")
    after = await store.bulk_batch(record.id, 10)
    assert after is not None
    assert (after.matched, after.done, after.finished) == (2, 1, True)
    assert await store.job_status(taken) is JobStatus.FAILED
    assert await store.job_status(free) is JobStatus.PENDING
    assert await store.job_status(holder) is JobStatus.PENDING


async def test_of_failed_jobs_with_one_unique_key_the_latest_is_retried(store: Store) -> None:
    """Both stores retry the same one (memory took the earliest, PostgreSQL the latest)."""
    earlier, later = [(await failed_jobs(store, 1, queue="bulk", unique_key="k"))[0] for _ in "ab"]
    record = await store.begin_bulk("retry", BulkFilter("bulk"), "ada")
    after = await store.bulk_batch(record.id, 10)
    assert after is not None
    assert (after.done, after.finished) == (1, True)
    assert await store.job_status(earlier) is JobStatus.FAILED
    assert await store.job_status(later) is JobStatus.PENDING


async def test_a_step_its_upstreams_failure_cancelled_waits_again_and_runs_after_it(
    store: Store,
) -> None:
    """Retrying a queue's failed and cancelled jobs retries the step that failed; the step it
    cancelled is not run at once beside it (it would find its upstream unfinished and fail for
    good): it waits again, as `jobs.retry` of the failed step leaves it, and runs after it."""
    steps = [
        NewStep(step=name, name="tests.send", queue="bulk", payload="{}", priority=0,
                max_attempts=1, upstream=upstream, allowed_failures=0)
        for name, upstream in [("pay", ()), ("ship", (0,))]
    ]  # fmt: skip
    ids = (await store.insert_workflow(NewWorkflow.of("order", steps, None))).steps
    [claim] = await store.claim_batch("bulk", 10, "w", LEASE)
    await store.record_outcomes([ended(claim, JobStatus.FAILED, error="declined")])
    assert await store.job_status(ids["ship"]) is JobStatus.CANCELLED
    record = await store.begin_bulk("retry", BulkFilter("bulk"), "ada")
    after = await store.bulk_batch(record.id, 10)
    assert after is not None
    assert (after.matched, after.done, after.finished) == (1, 1, True)
    assert await store.job_status(ids["ship"]) is JobStatus.WAITING
    [again] = await store.claim_batch("bulk", 10, "w", LEASE)
    assert again.id == ids["pay"]
    await store.record_outcomes([ended(again, JobStatus.SUCCEEDED, result="1")])
    assert await store.job_status(ids["ship"]) is JobStatus.PENDING


async def test_no_such_record_has_no_batch(store: Store) -> None:
    assert await store.bulk_batch(12345, 10) is None
    assert await store.get_bulk(12345) is None
    assert await store.list_bulks(10) == []


async def test_a_record_begun_after_one_was_pruned_takes_a_new_id(store: Store) -> None:
    """On memory, the id was the count of records plus one: with the first pruned, the third
    took the id of the second, still running, and replaced it."""
    first = await store.begin_bulk("cancel", BulkFilter("one"), "ada")
    second = await store.begin_bulk("cancel", BulkFilter("two"), "grace")
    assert await store.bulk_batch(first.id, 10) is not None  # finished: nothing to cancel
    assert await store.prune_bulks(0) == 1
    third = await store.begin_bulk("retry", BulkFilter("three"), "linus")
    assert third.id not in (first.id, second.id)
    assert await store.get_bulk(second.id) == second
    assert [r.id for r in await store.list_bulks(10)] == [third.id, second.id]


# -- through `Jobs` ------------------------------------------------------------------------------


@pytest.fixture
async def jobs(postgres_dsn: str | None) -> Jobs:
    return Jobs(postgres_dsn or "memory://", queues={})


async def test_run_bulk_runs_it_to_its_end_and_an_unfinished_one_runs_on(jobs: Jobs) -> None:
    async with jobs:
        store = jobs._ready_store
        ids = await failed_jobs(store, 7, queue="bulk")
        record = await jobs.begin_bulk("retry", queue="bulk", status="failed", by="ada")
        # One batch, then the process "stops": the record shows it unfinished.
        first = await store.bulk_batch(record.id, 3)
        assert first is not None
        assert (first.done, first.finished) == (3, False)
        unfinished = await jobs.get_bulk(record.id)
        assert unfinished == first
        # Run again, it picks up what is left.
        end = await jobs.run_bulk(record.id, batch_size=3)
        assert end is not None
        assert (end.matched, end.done, end.finished) == (7, 7, True)
        assert await jobs.run_bulk(record.id) == end  # finished: as it is
        assert await jobs.run_bulk(987654) is None
        assert [await jobs.get(i) for i in ids] != []
        assert {(await store.job_status(i)) for i in ids} == {JobStatus.PENDING}
        assert await jobs.list_bulks() == [end]
