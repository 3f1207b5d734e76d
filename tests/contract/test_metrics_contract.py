"""`Store.queue_depths`, what the queues' gauges report (docs/metrics.md), on both stores: the
pending jobs (those due among them, and how long the oldest due one waited) and the running
ones of each queue; finished jobs and queues with nothing left are not counted."""

from __future__ import annotations

import asyncio

from starlette_jobs import JobStatus
from starlette_jobs._metric_records import QueueDepth
from starlette_jobs.store._protocol import Store
from tests.records import new_jobs, outcome


async def test_an_empty_store_has_no_depth(store: Store) -> None:
    assert await store.queue_depths() == []


async def test_each_queue_counts_its_pending_due_and_running_jobs(store: Store) -> None:
    await store.insert_jobs(new_jobs(3, queue="mail"))
    await store.insert_jobs(new_jobs(2, queue="mail", delay=3600))
    await store.insert_jobs(new_jobs(4, queue="sms"))
    await store.claim_batch("sms", 3, "w", 30)
    [finished] = await store.claim_batch("mail", 1, "w", 30)
    assert await store.record_outcomes([outcome(finished, JobStatus.SUCCEEDED)]) == {finished.id}
    depths = {depth.queue: depth for depth in await store.queue_depths()}
    assert list(depths) == ["mail", "sms"]
    mail, sms = depths["mail"], depths["sms"]
    assert (mail.pending, mail.due, mail.running) == (4, 2, 0)
    assert (sms.pending, sms.due, sms.running) == (1, 1, 3)
    assert isinstance(mail, QueueDepth)


async def test_the_oldest_due_job_ages_and_none_due_is_zero(store: Store) -> None:
    await store.insert_jobs(new_jobs(1, queue="mail"))
    await store.insert_jobs(new_jobs(1, queue="later", delay=3600))
    await asyncio.sleep(0.05)  # the store's clock: the due job waits
    depths = {depth.queue: depth for depth in await store.queue_depths()}
    assert 0.05 <= depths["mail"].oldest_due_age < 30
    assert depths["later"].oldest_due_age == 0
    assert (depths["later"].pending, depths["later"].due) == (1, 0)


async def test_a_queue_whose_jobs_all_finished_is_not_listed(store: Store) -> None:
    await store.insert_jobs(new_jobs(1, queue="mail"))
    [claim] = await store.claim_batch("mail", 1, "w", 30)
    await store.record_outcomes([outcome(claim, JobStatus.FAILED)])
    assert await store.queue_depths() == []
