"""Steps a running step adds to its own workflow (docs/workflows.md), on PostgreSQL and memory
alike: they join the graph between that step and the steps waiting for it, which wait for them
too (never released before them) and read their results, typed; a step retried adds them once;
names taken, jobs of no workflow and lost leases are refused with nothing written."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pydantic
import pytest

from starlette_jobs import (
    EventKind,
    Jobs,
    JobStatus,
    Retry,
    StepNotRunningError,
    Workflow,
    current_job,
    job,
)
from starlette_jobs._attempt_records import Outcome
from starlette_jobs._workflow_records import NewStep, NewWorkflow

ran: list[str] = []
failing_once: set[str] = set()


@pytest.fixture(autouse=True)
def _fresh() -> None:
    ran.clear()
    failing_once.clear()


@pytest.fixture
async def jobs(jobs_dsn: str) -> AsyncIterator[Jobs]:
    async with Jobs(jobs_dsn, poll_interval=0.05, queues={"default": 8}) as started:
        yield started


@pytest.fixture
async def idle(jobs_dsn: str) -> AsyncIterator[Jobs]:
    """No worker: the test claims and writes outcomes itself."""
    async with Jobs(jobs_dsn, queues={}) as started:
        yield started


class Page(pydantic.BaseModel):
    number: int
    words: int


@job(name="added.count_words")
async def count_words(number: int) -> Page:
    ran.append(f"page {number}")
    return Page(number=number, words=10 * number)


@job(name="added.list_pages", retry=Retry.fixed(max_attempts=2, delay=0))
async def list_pages(pages: int) -> int:
    """Fans out over the pages it "fetched": one step per page, added while it runs."""
    me = current_job()
    assert me is not None
    ran.append(f"list {me.attempt}")
    more = me.extend_workflow()
    more.add_many("page", count_words, [{"number": n} for n in range(1, pages + 1)])
    added = await more.enqueue()
    assert list(added.steps) == [f"page[{n}]" for n in range(pages)]
    if "list" in failing_once:
        failing_once.discard("list")
        raise ConnectionError("the list's source hung up after the steps were added")
    return pages


@job(name="added.summarize")
async def summarize() -> str:
    me = current_job()
    assert me is not None
    pages = await me.upstream_result("list", int)
    added = [step for step in await me.upstream_statuses() if step.startswith("page")]
    counted = {step: await me.upstream_result(step, Page) for step in added}
    ran.append("summarize")
    words = sum(page.words for page in counted.values())  # typed: each one a Page
    return f"{pages} pages, {len(counted)} counted, {words} words"


@job(name="added.statuses")
async def statuses() -> dict[str, str]:
    me = current_job()
    assert me is not None
    ran.append("statuses")
    return {step: status.value for step, status in (await me.upstream_statuses()).items()}


async def test_a_step_fans_out_and_its_dependents_read_the_added_results(jobs: Jobs) -> None:
    flow = Workflow("fan out while running")
    listed = flow.add("list", list_pages, pages=5)
    flow.after(listed).add("summary", summarize)
    enqueued = await flow.enqueue()
    await jobs.drain()
    assert await jobs.result(summarize, enqueued.steps["summary"]) == (
        "5 pages, 5 counted, 150 words"
    )
    assert ran[-1] == "summarize"  # after every page it waits for
    assert sorted(ran[:-1]) == ["list 1", *(f"page {n}" for n in range(1, 6))]
    record = await jobs.workflow(enqueued.id)
    assert record is not None
    assert record["summary"].waits_for == ("list", *(f"page[{n}]" for n in range(5)))
    assert record["page[3]"].waits_for == ()
    assert record.finished
    assert all(step.job.attempts == 1 for step in record.steps)
    events = await jobs.events(record["page[0]"].job.id)
    assert {event.workflow_id for event in events} == {enqueued.id}


async def test_the_dependents_are_not_released_before_the_added_steps(idle: Jobs) -> None:
    flow = Workflow("held")
    listed = flow.add("list", list_pages, pages=2)
    flow.after(listed).add("summary", summarize)
    enqueued = await flow.enqueue(jobs=idle)
    store = idle._ready_store
    (claim,) = await store.claim_batch("default", 10, "w", 30)
    new = NewWorkflow.of("more", (step("page[0]"), step("page[1]")), None)
    added = await store.add_steps(claim.id, claim.lease_token, new)
    assert added.id == enqueued.id
    await succeed(idle, claim.id, claim.lease_token, "2")
    # The list step finished, but the summary waits for the two pages it added.
    claims = await store.claim_batch("default", 10, "w", 30)
    assert sorted(c.id for c in claims) == sorted(added.steps.values())
    await succeed(idle, claims[0].id, claims[0].lease_token, '{"number": 1, "words": 1}')
    assert await store.claim_batch("default", 10, "w", 30) == []
    summary = await idle.get(enqueued.steps["summary"])
    assert summary is not None
    assert summary.status is JobStatus.WAITING
    await succeed(idle, claims[1].id, claims[1].lease_token, '{"number": 2, "words": 2}')
    (released,) = await store.claim_batch("default", 10, "w", 30)
    assert released.id == enqueued.steps["summary"]
    kinds = [event.kind for event in await idle.events(released.id)]
    assert kinds == [EventKind.ENQUEUED, EventKind.READY, EventKind.CLAIMED]  # released once


async def test_a_retried_step_adds_its_steps_once(jobs: Jobs) -> None:
    failing_once.add("list")
    flow = Workflow("retried fan out")
    listed = flow.add("list", list_pages, pages=3)
    flow.after(listed).add("summary", summarize)
    enqueued = await flow.enqueue()
    await jobs.drain()
    assert await jobs.result(summarize, enqueued.steps["summary"]) == (
        "3 pages, 3 counted, 60 words"
    )
    assert sorted(r for r in ran if r.startswith("list")) == ["list 1", "list 2"]
    assert sorted(r for r in ran if r.startswith("page")) == ["page 1", "page 2", "page 3"]
    record = await jobs.workflow(enqueued.id)
    assert record is not None
    assert [s.step for s in record.steps] == ["list", "summary", "page[0]", "page[1]", "page[2]"]


@job(name="added.flaky_page", retry=Retry.none())
async def flaky_page(number: int) -> int:
    ran.append(f"flaky {number}")
    if number == 2:
        raise RuntimeError("page 2 is unreadable")
    return number


@job(name="added.list_flaky")
async def list_flaky() -> None:
    me = current_job()
    assert me is not None
    more = me.extend_workflow()
    more.add_many("page", flaky_page, [{"number": 1}, {"number": 2}])
    await more.enqueue()


async def test_an_added_step_that_fails_cancels_the_dependents_a_clean_up_still_runs(
    jobs: Jobs,
) -> None:
    flow = Workflow("added failure")
    listed = flow.add("list", list_flaky)
    flow.after(listed).add("summary", summarize)
    flow.after(listed, always=True).add("cleanup", statuses)
    enqueued = await flow.enqueue()
    await jobs.drain()
    record = await jobs.workflow(enqueued.id)
    assert record is not None
    assert record.statuses == {
        "list": JobStatus.SUCCEEDED,
        "summary": JobStatus.CANCELLED,
        "cleanup": JobStatus.SUCCEEDED,
        "page[0]": JobStatus.SUCCEEDED,
        "page[1]": JobStatus.FAILED,
    }
    assert record["summary"].job.last_error == (
        f"cancelled: it waits for step page[1] (job {record['page[1]'].job.id}) failed"
    )
    assert record["cleanup"].result == {
        "list": "succeeded",
        "page[0]": "succeeded",
        "page[1]": "failed",
    }


@job(name="added.taking", retry=Retry.none())
async def taking(name: str) -> None:
    me = current_job()
    assert me is not None
    more = me.extend_workflow()
    more.add(name, count_words, number=1)
    await more.enqueue()


async def test_a_name_taken_in_the_workflow_is_refused_with_nothing_written(jobs: Jobs) -> None:
    flow = Workflow("taken")
    flow.add("adder", taking, name="summary")
    flow.add("summary", statuses)  # a step that succeeds alone: no retries to wait through
    enqueued = await flow.enqueue()
    await jobs.drain()
    record = await jobs.workflow(enqueued.id)
    assert record is not None
    assert [s.step for s in record.steps] == ["adder", "summary"]
    assert record["adder"].status is JobStatus.FAILED
    error = record["adder"].job.last_error
    assert error is not None
    assert "WorkflowDefinitionError" in error
    assert f"already (job {enqueued.steps['summary']}" in error


@job(name="added.length")
async def length(text: str) -> int:
    return len(text)


@job(name="added.large", retry=Retry.none())
async def adding_large(size: int) -> None:
    me = current_job()
    assert me is not None
    more = me.extend_workflow()
    more.add("large", length, text="x" * size)
    await more.enqueue()


async def test_an_added_step_over_max_payload_bytes_is_refused_as_an_enqueue_is(
    jobs_dsn: str,
) -> None:
    async with Jobs(jobs_dsn, queues={"default": 2}, max_payload_bytes=1000) as jobs:
        ids = {}
        for size in (900, 5000):
            flow = Workflow(f"adds {size}")
            flow.add("adder", adding_large, size=size)
            ids[size] = (await flow.enqueue()).id
        await jobs.drain()
        within = await jobs.workflow(ids[900])
        assert within is not None
        assert within["large"].job.result == 900
        over = await jobs.workflow(ids[5000])
        assert over is not None
        assert [s.step for s in over.steps] == ["adder"]  # nothing added
        error = over["adder"].job.last_error
        assert error is not None
        assert "JobArgumentsError" in error
        assert "over the limit of 1000 (max_payload_bytes)" in error


async def test_a_job_of_no_workflow_cannot_add_steps(jobs: Jobs) -> None:
    job_id = await taking.enqueue(name="a")
    await jobs.drain()
    record = await jobs.get(job_id)
    assert record is not None
    assert record.status is JobStatus.FAILED
    assert record.last_error is not None
    assert f"job {job_id} is not a workflow's step" in record.last_error


async def test_an_attempt_that_lost_its_lease_or_was_asked_to_stop_adds_nothing(idle: Jobs) -> None:
    flow = Workflow("lost")
    listed = flow.add("list", list_pages, pages=1)
    flow.after(listed).add("summary", summarize)
    enqueued = await flow.enqueue(jobs=idle)
    store = idle._ready_store
    (claim,) = await store.claim_batch("default", 10, "w", 30)
    assert await store.release_jobs([(claim.id, claim.lease_token)]) == {claim.id}
    new = NewWorkflow.of("more", (step("page[0]"),), None)
    with pytest.raises(StepNotRunningError, match=f"job {claim.id}: this attempt no longer"):
        await store.add_steps(claim.id, claim.lease_token, new)
    (claim,) = await store.claim_batch("default", 10, "w", 30)
    assert await idle.cancel_workflow(enqueued.id) == 2  # the summary, and the list asked to stop
    with pytest.raises(StepNotRunningError, match="or was asked to stop"):
        await store.add_steps(claim.id, claim.lease_token, new)
    record = await idle.workflow(enqueued.id)
    assert record is not None
    assert [s.step for s in record.steps] == ["list", "summary"]
    assert record["summary"].waits_for == ("list",)


def step(name: str, *upstream: int) -> NewStep:
    return NewStep(
        step=name, name="added.count_words", queue="default", payload='{"number": 1}',
        priority=0, max_attempts=1, upstream=upstream, allowed_failures=0,
    )  # fmt: skip


async def succeed(jobs: Jobs, job_id: int, token: object, result: str) -> None:
    outcome = Outcome(
        id=job_id, lease_token=token, status=JobStatus.SUCCEEDED,  # type: ignore[arg-type]
        retry_delay=None, error=None, result=result,
    )  # fmt: skip
    assert await jobs._ready_store.record_outcomes([outcome]) == {job_id}
