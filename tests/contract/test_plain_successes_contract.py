"""Successes of jobs of no workflow, written apart from the steps' (docs/performance.md): a
claim says which workflow its job is a step of, on both stores; a batch that mixes plain jobs
and steps still tells the steps waiting; a batch of plain jobs is written as any success is."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from starlette_jobs import EventKind, Jobs, JobStatus, QueueLimits, Workflow, job
from starlette_jobs._attempt_records import Claim, Outcome


@job(name="plain.echo")
async def echo(label: str) -> str:
    return label


@pytest.fixture
async def idle(jobs_dsn: str) -> AsyncIterator[Jobs]:
    """No worker: the test claims and writes outcomes itself."""
    async with Jobs(jobs_dsn, queues={}) as started:
        yield started


def success(claim: Claim) -> Outcome:
    """What the worker makes of a claim whose job returned "ok"."""
    return Outcome(
        id=claim.id, lease_token=claim.lease_token, status=JobStatus.SUCCEEDED,
        retry_delay=None, error=None, result='"ok"', of_workflow=claim.workflow_id is not None,
    )  # fmt: skip


async def test_a_claim_names_the_workflow_of_a_step_and_none_for_a_plain_job(idle: Jobs) -> None:
    plain = await idle.enqueue(echo, "plain")
    flow = Workflow("named")
    flow.after(flow.add("first", echo, label="first")).add("second", echo, label="second")
    enqueued = await flow.enqueue(jobs=idle)
    claims = {c.id: c for c in await idle._ready_store.claim_batch("default", 10, "w", 30)}
    assert claims.keys() == {plain, enqueued.steps["first"]}
    assert claims[plain].workflow_id is None
    assert claims[enqueued.steps["first"]].workflow_id == enqueued.id


async def test_a_batch_of_plain_jobs_and_a_step_releases_the_step_waiting(idle: Jobs) -> None:
    plain = await idle.enqueue(echo, "plain")
    flow = Workflow("mixed")
    flow.after(flow.add("first", echo, label="first")).add("second", echo, label="second")
    enqueued = await flow.enqueue(jobs=idle)
    store = idle._ready_store
    claims = await store.claim_batch("default", 10, "w", 30)
    assert await store.record_outcomes([success(c) for c in claims]) == {c.id for c in claims}
    (second,) = await store.claim_batch("default", 10, "w", 30)
    assert second.id == enqueued.steps["second"]
    record = await idle.get(plain)
    assert record is not None
    assert record.status is JobStatus.SUCCEEDED


async def test_a_batch_of_plain_jobs_is_written_with_results_and_events(idle: Jobs) -> None:
    ids = [await idle.enqueue(echo, f"n{i}") for i in range(3)]
    store = idle._ready_store
    claims = await store.claim_batch("default", 10, "w", 30)
    outcomes = [success(c) for c in claims]
    assert not any(o.of_workflow for o in outcomes)
    assert await store.record_outcomes(outcomes) == set(ids)
    for job_id in ids:
        record = await idle.get(job_id)
        assert record is not None
        assert (record.status, record.result, record.finished_at is not None) == (
            JobStatus.SUCCEEDED, "ok", True,
        )  # fmt: skip
        kinds = [event.kind for event in await idle.events(job_id)]
        assert kinds[-1] is EventKind.SUCCEEDED
    # A lease already ended writes nothing, as for any outcome.
    assert await store.record_outcomes(outcomes) == set()


async def test_a_step_written_as_plain_is_still_told_by_the_upkeeps_settle(idle: Jobs) -> None:
    # Never made by the worker (a step's claim names its workflow), but the statement for
    # plain jobs leaves the step unsettled: the upkeep's settle tells what waits for it.
    flow = Workflow("unsettled")
    flow.after(flow.add("first", echo, label="first")).add("second", echo, label="second")
    enqueued = await flow.enqueue(jobs=idle)
    store = idle._ready_store
    (first,) = await store.claim_batch("default", 10, "w", 30)
    wrong = success(first)
    wrong.of_workflow = False
    assert await store.record_outcomes([wrong]) == {first.id}
    await store.settle_steps()
    (second,) = await store.claim_batch("default", 10, "w", 30)
    assert second.id == enqueued.steps["second"]


async def test_a_claim_from_a_limited_queue_names_the_workflow_too(idle: Jobs) -> None:
    store = idle._ready_store
    await store.declare_queues({"default": QueueLimits(global_limit=5)})
    plain = await idle.enqueue(echo, "plain")
    flow = Workflow("limited")
    flow.add("only", echo, label="only")
    enqueued = await flow.enqueue(jobs=idle)
    claims = {c.id: c for c in await store.claim_limited_batch("default", 10, "w", 30)}
    assert claims[plain].workflow_id is None
    assert claims[enqueued.steps["only"]].workflow_id == enqueued.id
