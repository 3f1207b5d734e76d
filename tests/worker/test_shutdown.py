"""Shutdown (`_shutdown`): its bound, and the grace running jobs get before they are cancelled.
Whole shutdowns, on a healthy database and on a silent network, are in
integration/test_shutdown.py and integration/test_silent_network.py."""

from __future__ import annotations

import asyncio
from uuid import UUID, uuid4

import pytest

from starlette_jobs import JobStatus
from starlette_jobs._attempt_records import Claim
from starlette_jobs._workflow_records import NewStep, NewWorkflow
from starlette_jobs.memory._store import MemoryStore
from starlette_jobs.worker._shutdown import (
    give_running_jobs_the_grace,
    release_held,
    shutdown_bound,
)
from starlette_jobs.worker._threads import JobThreads


@pytest.mark.parametrize(
    ("grace", "lease", "bound"),
    [
        (10.0, 30.0, 10 + 0.5 + 10 + 2),  # the defaults: statements wait at most 10 s
        (0.0, 3.0, 0 + 0.5 + 1 + 2),  # a third of the lease, at least a second
        (60.0, 600.0, 60 + 0.5 + 10 + 2),
    ],
)
def test_shutdown_is_bounded_by_grace_unwinding_last_writes_and_closing(
    grace: float, lease: float, bound: float
) -> None:
    assert shutdown_bound(grace, lease) == pytest.approx(bound)


def claim(job_id: int, name: str = "tests.async") -> Claim:
    return Claim(
        id=job_id,
        name=name,
        queue="default",
        payload="{}",
        attempts=1,
        max_attempts=3,
        lease_token=uuid4(),
        trace_context=None,
    )


async def test_jobs_that_end_within_the_grace_are_not_released_and_the_rest_are() -> None:
    quick_done = asyncio.Event()

    async def quick() -> None:
        quick_done.set()

    async def slow() -> None:
        await asyncio.sleep(60)

    async def catches_and_returns() -> None:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            return  # its outcome is buffered like any other: not released

    tasks = {
        asyncio.create_task(quick()): claim(1),
        asyncio.create_task(slow()): claim(2),
        asyncio.create_task(catches_and_returns()): claim(3),
    }
    cancelled: list[UUID] = []

    def cancel(token: UUID, task: asyncio.Task[None]) -> None:
        cancelled.append(token)
        task.cancel()

    to_release, abandoned = await give_running_jobs_the_grace(tasks, JobThreads(), 0.2, cancel)
    assert quick_done.is_set()
    by_id = {c.id: c for c in tasks.values()}
    assert to_release == [(2, by_id[2].lease_token)]
    assert sorted(cancelled) == sorted([by_id[2].lease_token, by_id[3].lease_token])
    assert abandoned == 0


async def test_an_attempt_that_ignores_cancellation_is_left_behind_and_counted() -> None:
    stop = asyncio.Event()

    async def stubborn() -> None:
        while not stop.is_set():
            try:
                await stop.wait()
            except asyncio.CancelledError:
                continue

    def cancel(_token: UUID, task: asyncio.Task[None]) -> None:
        task.cancel()

    task = asyncio.create_task(stubborn())
    stubborn_claim = claim(4)
    to_release, abandoned = await give_running_jobs_the_grace(
        {task: stubborn_claim}, JobThreads(), 0.05, cancel
    )
    assert (to_release, abandoned) == ([(4, stubborn_claim.lease_token)], 1)
    stop.set()
    await task


async def test_with_nothing_running_there_is_nothing_to_wait_for() -> None:
    assert await give_running_jobs_the_grace({}, JobThreads(), 10.0, lambda *_: None) == ([], 0)


def two_steps() -> NewWorkflow:
    first = NewStep(
        step="first", name="tests.a", queue="q", payload="{}", priority=0, max_attempts=1,
        upstream=(), allowed_failures=0,
    )  # fmt: skip
    second = NewStep(
        step="second", name="tests.b", queue="q", payload="{}", priority=0, max_attempts=1,
        upstream=(0,), allowed_failures=0,
    )  # fmt: skip
    return NewWorkflow.of("w", (first, second), None)


async def test_a_step_released_cancelled_at_shutdown_tells_its_dependents_at_once() -> None:
    store = MemoryStore()
    enqueued = await store.insert_workflow(two_steps())
    (running,) = await store.claim_batch("q", 10, "w", 30)
    assert await store.cancel_job(running.id) is JobStatus.RUNNING  # asked to stop
    await release_held(store, [(running.id, running.lease_token)])
    assert await store.job_status(running.id) is JobStatus.CANCELLED
    # Told now, not at the next upkeep round of some other worker.
    assert await store.job_status(enqueued.steps["second"]) is JobStatus.CANCELLED
