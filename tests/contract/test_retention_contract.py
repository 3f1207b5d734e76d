"""Retention keeps pace on both stores: a backlog of old finished jobs far past what one round
deleted before (20,000 rows) is worked off by the worker's retention in one go, with the jobs'
events, and the unfinished jobs are kept. Its rounds one by one: worker/test_retention.py."""

from __future__ import annotations

import asyncio

import pytest

from starlette_jobs import JobStatus
from starlette_jobs._attempt_records import Pruned
from starlette_jobs._workflow_records import NewStep, NewWorkflow
from starlette_jobs.store._protocol import Store
from starlette_jobs.worker import _retention
from starlette_jobs.worker._retention import Retention
from tests.records import new_jobs, outcome

BACKLOG = 50_000


async def test_a_backlog_of_50000_old_jobs_is_worked_off_without_waiting_for_rounds(
    store: Store,
) -> None:
    old = await store.insert_jobs(new_jobs(BACKLOG))
    claims = await store.claim_batch("default", BACKLOG, "w", 30)
    await store.record_outcomes([outcome(c, JobStatus.SUCCEEDED) for c in claims])
    [running] = await store.insert_jobs(new_jobs(1))
    await store.claim_batch("default", 1, "w", 30)
    [waiting] = await store.insert_jobs(new_jobs(1, delay=3600))
    await asyncio.sleep(0.05)  # the store's clock: the backlog finished more than 0.01 s ago

    retention = Retention(store, interval=60, retention=0.01)
    # Each call is a round the worker's task runs at once while the last one left rows behind.
    while await retention.prune_round():
        pass
    counts = await store.count_by_status(None)
    assert (counts[JobStatus.PENDING], counts[JobStatus.RUNNING]) == (1, 1)
    assert sum(counts.values()) == 2
    assert sorted(r.id for r in await store.list_jobs(None, None, 10)) == [running, waiting]
    assert await store.job_events(old[0]) == []
    assert await store.job_events(old[-1]) == []
    assert await store.job_events(running) != []


async def test_a_workflow_goes_with_its_last_step_and_one_with_steps_left_stays(
    store: Store,
) -> None:
    """Retention deletes a workflow's record once its steps are all deleted (`jobs.workflows()`
    no longer lists it); a workflow whose steps are not all old enough stays, whole."""
    step = NewStep(step="only", name="tests.part", queue="flows", payload="{}", priority=0,
                   max_attempts=1, upstream=(), allowed_failures=0)  # fmt: skip
    done = await store.insert_workflow(NewWorkflow.of("done", [step], None))
    claims = await store.claim_batch("flows", 10, "w", 30)
    await store.record_outcomes([outcome(c, JobStatus.SUCCEEDED) for c in claims])
    await asyncio.sleep(0.05)
    running = await store.insert_workflow(NewWorkflow.of("running", [step], None))
    await store.claim_batch("flows", 10, "w", 30)
    assert (await store.prune_finished(0.01, 100)).deleted == 1
    assert await store.get_workflow(done.id) is None
    assert [w.id for w in await store.list_workflows(10, None)] == [running.id]
    assert await store.get_workflow(running.id) is not None


RETENTION = 1.0


async def _finish(store: Store, queue: str, status: JobStatus, count: int) -> list[int]:
    """`count` jobs of `queue` that ended `status` now."""
    ids = await store.insert_jobs(new_jobs(count, queue=queue, max_attempts=1))
    if status is JobStatus.CANCELLED:
        for job_id in ids:
            assert await store.cancel_job(job_id) is JobStatus.CANCELLED
        return ids
    claims = await store.claim_batch(queue, count, "w", 30)
    error = "boom" if status is JobStatus.FAILED else None
    await store.record_outcomes([outcome(c, status, error=error) for c in claims])
    return ids


async def test_old_jobs_of_every_queue_and_status_are_deleted_batch_after_batch(
    store: Store,
) -> None:
    """Batches smaller than the old jobs of one queue and status: every queue's and every
    status's old jobs go, one batch after another, and the recent ones of each stay."""
    queues = ("alpha", "beta", "gamma")
    ended = (JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.CANCELLED)
    old = [i for q in queues for status in ended for i in await _finish(store, q, status, 3)]
    # The store's clock: these finished more than RETENTION ago; the recent ones, written next,
    # stay younger than it for as long as writing them and the batches take (well under 1 s
    # on a loaded machine).
    await asyncio.sleep(RETENTION + 0.5)
    recent = [i for q in queues for status in ended for i in await _finish(store, q, status, 1)]
    [pending] = await store.insert_jobs(new_jobs(1, queue="beta"))

    batches, after = [], None  # as a round does: each batch starts where the last one ended
    while True:
        batch = await store.prune_finished(RETENTION, 2, after)
        batches.append(batch.deleted)
        if (after := batch.through) is None:  # it looked at the last old job
            break
    assert sum(batches) == len(old) == 27
    assert max(batches) == 2
    left = {record.id for record in await store.list_jobs(None, None, 100)}
    assert left == {*recent, pending}


async def test_a_batch_looks_at_no_more_than_its_limit_and_the_next_starts_after_it(
    store: Store,
) -> None:
    """A batch looks at `limit` old jobs at most, deleted or kept (here the step of a running
    workflow, finished first), and `through` is the last it looked at; given as `after`, the
    next batch starts past it. So old jobs kept by the million cost each batch `limit` rows,
    a pass at a time: a batch used to read past all of them to find `limit` to delete (0.5 s
    a batch with 350,000 of them; with some millions, longer than the statement timeout)."""
    kept = await store.insert_workflow(
        NewWorkflow.of("running", [*(_step(name) for name in ("done", "left"))], None)
    )
    [done_claim] = await store.claim_batch("flows", 1, "w", 30)
    await store.record_outcomes([outcome(done_claim, JobStatus.SUCCEEDED)])
    plain = []
    for _ in range(3):  # one at a time: finished at three times, in order
        [job_id] = await store.insert_jobs(new_jobs(1, queue="plain"))
        [claim] = await store.claim_batch("plain", 1, "w", 30)
        await store.record_outcomes([outcome(claim, JobStatus.SUCCEEDED)])
        plain.append(job_id)
    finished = {}
    for job_id in (kept.steps["done"], *plain):
        record = await store.get_job(job_id)
        assert record is not None
        assert record.finished_at is not None
        finished[job_id] = (record.finished_at, job_id)
    await asyncio.sleep(0.05)

    first = await store.prune_finished(0.01, 1)
    assert (first.deleted, first.through) == (0, finished[kept.steps["done"]])
    second = await store.prune_finished(0.01, 2, first.through)
    assert (second.deleted, second.through) == (2, finished[plain[1]])
    # Short: it looked at the last old job, and says the next batch starts from the first.
    assert await store.prune_finished(0.01, 2, second.through) == Pruned(1, None)
    assert await store.prune_finished(0.01, 10) == Pruned(0, None)  # the running step's
    assert await store.get_job(kept.steps["done"]) is not None


async def test_jobs_that_finished_at_one_instant_are_gone_through_a_batch_at_a_time(
    store: Store,
) -> None:
    """Jobs written by one statement share its instant: here three steps of a running workflow
    (kept) and three plain jobs, in batches of two. Each batch starts past the last job the
    last one looked at, by (finished_at, id): it never looks at the kept ones again and again
    (more of them than a batch holds, at one instant: a cursor of the instant alone would)."""
    flow = await store.insert_workflow(
        NewWorkflow.of("running", [_step(f"s{i}") for i in range(4)], None)
    )
    await store.insert_jobs(new_jobs(3, queue="flows"))
    claims = await store.claim_batch("flows", 7, "w", 30)
    left_running = next(c for c in claims if c.id == flow.steps["s3"])
    await store.record_outcomes(
        [outcome(c, JobStatus.SUCCEEDED) for c in claims if c is not left_running]
    )
    await asyncio.sleep(0.05)
    deleted, after, batches = 0, None, 0
    while True:
        batch = await store.prune_finished(0.01, 2, after)
        deleted, batches = deleted + batch.deleted, batches + 1
        if (after := batch.through) is None:
            break
        assert batches < 10, "looked at the same jobs again and again"
    assert deleted == 3
    counts = await store.count_by_status(None)
    assert (counts[JobStatus.SUCCEEDED], counts[JobStatus.RUNNING]) == (3, 1)  # the steps


async def test_a_round_goes_on_where_the_last_one_left_off_and_a_pass_starts_over(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rounds of one batch each (a round's time ran out): each goes on past the old steps the
    last one looked at and kept, until the old plain jobs behind them are deleted; the round
    after the last old job starts from the first again, and deletes the steps whose workflow
    has finished meanwhile."""
    monkeypatch.setattr(_retention, "BATCH", 2)
    monkeypatch.setattr(_retention, "ROUND_SECONDS", 0.0)
    flow = await store.insert_workflow(
        NewWorkflow.of("running", [_step(f"s{i}") for i in range(5)], None)
    )
    claims = await store.claim_batch("flows", 5, "w", 30)
    await store.record_outcomes([outcome(c, JobStatus.SUCCEEDED) for c in claims[:4]])
    plain = [i for _ in range(3) for i in await _finish(store, "plain", JobStatus.SUCCEEDED, 1)]
    await asyncio.sleep(0.05)  # the store's clock: all of them finished more than 0.01 s ago

    retention = Retention(store, interval=60, retention=0.01)
    behind = [await retention.prune_round() for _ in range(4)]
    assert behind == [True, True, True, False]  # steps 1-2, 3-4 kept; plain 1-2; plain 3
    assert [await store.get_job(job_id) for job_id in plain] == [None] * 3
    assert (await store.count_by_status(None))[JobStatus.SUCCEEDED] == 4  # the steps

    await store.record_outcomes([outcome(claims[4], JobStatus.SUCCEEDED)])  # it finished
    await asyncio.sleep(0.05)
    while await retention.prune_round():
        pass
    assert await store.get_workflow(flow.id) is None  # gone with its last step


def _step(name: str) -> NewStep:
    return NewStep(step=name, name="tests.part", queue="flows", payload="{}", priority=0,
                   max_attempts=1, upstream=(), allowed_failures=0)  # fmt: skip
