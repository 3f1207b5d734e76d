"""`jobs.workflows()` on both stores: the most recent workflows first, each with its steps
counted by status, paged by the last id seen."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from starlette_jobs import Jobs, JobStatus, Workflow, job


@job(queue="wf-listing")
async def step_job(n: int) -> int:
    return n


@pytest.fixture
async def jobs(jobs_dsn: str) -> AsyncIterator[Jobs]:
    async with Jobs(jobs_dsn, queues={}) as started:
        yield started


async def enqueue(name: str, steps: int) -> int:
    flow = Workflow(name)
    first = flow.add("first", step_job, n=0)
    for n in range(1, steps):
        flow.after(first).add(f"then-{n}", step_job, n=n)
    return (await flow.enqueue()).id


async def test_workflows_are_listed_newest_first_with_their_steps_by_status(jobs: Jobs) -> None:
    older = await enqueue("onboarding", 3)
    newer = await enqueue("invoice", 2)

    listed = await jobs.workflows()
    assert [(flow.id, flow.name) for flow in listed] == [(newer, "invoice"), (older, "onboarding")]
    onboarding = listed[1]
    assert dict(onboarding.steps) == {JobStatus.PENDING: 1, JobStatus.WAITING: 2}
    assert (onboarding.step_count, onboarding.finished) == (3, False)

    await jobs.cancel_workflow(older)
    [_, cancelled] = await jobs.workflows()
    assert dict(cancelled.steps) == {JobStatus.CANCELLED: 3}
    assert cancelled.finished


async def test_pages_follow_on_from_the_last_workflow_seen(jobs: Jobs) -> None:
    ids = [await enqueue(f"flow-{n}", 1) for n in range(5)]
    pages: list[list[int]] = []
    before: int | None = None
    while page := await jobs.workflows(limit=2, before=before):
        pages.append([flow.id for flow in page])
        before = page[-1].id
    assert pages == [ids[:2:-1], ids[2:0:-1], ids[:1]]


async def test_no_workflow_lists_nothing(jobs: Jobs) -> None:
    assert await jobs.workflows() == []


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"limit": 0}, "limit must be"), ({"limit": 1001}, "limit must be"),
     ({"before": 0}, "before must be a workflow id"), ({"before": True}, "before must be")],
)  # fmt: skip
async def test_a_page_that_cannot_be_is_refused(
    jobs: Jobs, kwargs: dict[str, int], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        await jobs.workflows(**kwargs)
