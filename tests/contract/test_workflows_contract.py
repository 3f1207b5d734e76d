"""The workflows contract (docs/workflows.md), through `Jobs`, on PostgreSQL and memory alike:
a chain, a fan-out/fan-in of 100 steps, a diamond, results read typed by the steps that waited
for them, failures that cancel what waits (naming the cause), a clean-up step, "at least N of
M", retention that keeps what a step waits for while that step is kept, and `jobs.workflow`."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pydantic
import pytest

from starlette_jobs import (
    EventKind,
    Jobs,
    JobStatus,
    Retry,
    UpstreamStepError,
    Workflow,
    current_job,
    job,
)
from starlette_jobs._attempt_records import Outcome
from tests.records import outcome as ended

ran: list[str] = []


@pytest.fixture(autouse=True)
def _fresh() -> None:
    ran.clear()


@pytest.fixture
async def jobs(jobs_dsn: str) -> AsyncIterator[Jobs]:
    async with Jobs(jobs_dsn, poll_interval=0.05, queues={"default": 20}) as started:
        yield started


@pytest.fixture
async def idle(jobs_dsn: str) -> AsyncIterator[Jobs]:
    """No worker: the test claims and writes outcomes itself."""
    async with Jobs(jobs_dsn, queues={}) as started:
        yield started


class Rendered(pydantic.BaseModel):
    order_id: int
    pages: int


@job(name="wf.render")
async def render(order_id: int) -> Rendered:
    ran.append("render")
    return Rendered(order_id=order_id, pages=3)


@job(name="wf.capture")
async def capture(order_id: int, amount: int) -> int:
    ran.append("capture")
    return amount


@job(name="wf.send")
async def send(order_id: int) -> str:
    me = current_job()
    assert me is not None
    pdf = await me.upstream_result("render", Rendered)
    paid = await me.upstream_result("capture", int)
    ran.append("send")
    return f"order {pdf.order_id}: {pdf.pages} pages, {paid} paid"


@job(name="wf.square")
async def square(n: int) -> int:
    return n * n


@job(name="wf.total")
async def total() -> int:
    me = current_job()
    assert me is not None
    return sum((await me.upstream_results(int)).values())


@job(name="wf.append")
async def append(label: str) -> str:
    ran.append(label)
    me = current_job()
    assert me is not None
    before = await me.upstream_results(str)
    return label + "".join(f"<{before[k]}" for k in sorted(before))


@job(name="wf.boom", retry=Retry.none())
async def boom(label: str) -> None:
    ran.append(label)
    raise RuntimeError(f"{label} broke")


@job(name="wf.statuses")
async def statuses() -> dict[str, str]:
    me = current_job()
    assert me is not None
    ran.append("statuses")
    return {step: status.value for step, status in (await me.upstream_statuses()).items()}


async def test_a_chain_runs_in_order_and_passes_results_along(jobs: Jobs) -> None:
    flow = Workflow("chain")
    a = flow.add("a", append, label="a")
    b = flow.add("b", append, label="b")
    c = flow.add("c", append, label="c")
    flow.chain(a, b, c)
    enqueued = await flow.enqueue()
    await jobs.drain()
    assert ran == ["a", "b", "c"]
    assert await jobs.result(append, enqueued.steps["c"]) == "c<b<a"


async def test_results_reach_the_step_that_waited_with_their_types(jobs: Jobs) -> None:
    flow = Workflow("invoice")
    pdf = flow.add("render", render, order_id=7)
    paid = flow.add("capture", capture, order_id=7, amount=120)
    flow.after(pdf, paid).add("send", send, order_id=7)
    enqueued = await flow.enqueue()
    await jobs.drain()
    assert ran[-1] == "send"
    assert await jobs.result(send, enqueued.steps["send"]) == "order 7: 3 pages, 120 paid"


async def test_a_fan_out_of_100_steps_then_a_fan_in(jobs: Jobs) -> None:
    flow = Workflow("squares")
    parts = flow.add_many("square", square, [{"n": n} for n in range(100)])
    flow.after(*parts).add("total", total)
    enqueued = await flow.enqueue()
    await jobs.drain()
    assert await jobs.result(total, enqueued.steps["total"]) == sum(n * n for n in range(100))
    events = await jobs.events(enqueued.steps["total"])
    kinds = [event.kind for event in events]
    assert kinds == [EventKind.ENQUEUED, EventKind.READY, EventKind.CLAIMED, EventKind.SUCCEEDED]
    assert events[0].status is JobStatus.WAITING
    assert {event.workflow_id for event in events} == {enqueued.id}


async def test_a_diamond_runs_its_last_step_once_after_both_branches(jobs: Jobs) -> None:
    flow = Workflow("diamond")
    top = flow.add("top", append, label="top")
    left = flow.after(top).add("left", append, label="left")
    right = flow.after(top).add("right", append, label="right")
    flow.after(left, right).add("bottom", append, label="bottom")
    enqueued = await flow.enqueue()
    await jobs.drain()
    assert ran[0] == "top"
    assert sorted(ran[1:3]) == ["left", "right"]
    assert ran[3:] == ["bottom"]
    assert await jobs.result(append, enqueued.steps["bottom"]) == "bottom<left<top<right<top"


async def test_a_failed_step_cancels_what_waits_for_it_down_the_graph(jobs: Jobs) -> None:
    flow = Workflow("failing")
    broke = flow.add("broke", boom, label="broke")
    fine = flow.add("fine", append, label="fine")
    after = flow.after(broke, fine).add("after", append, label="after")
    last = flow.after(after).add("last", append, label="last")
    flow.after(last, always=True).add("cleanup", statuses)
    enqueued = await flow.enqueue()
    await jobs.drain()
    assert "after" not in ran
    assert "last" not in ran
    assert "statuses" in ran  # the clean-up step ran all the same
    record = await jobs.workflow(enqueued.id)
    assert record is not None
    assert record.statuses == {
        "broke": JobStatus.FAILED,
        "fine": JobStatus.SUCCEEDED,
        "after": JobStatus.CANCELLED,
        "last": JobStatus.CANCELLED,
        "cleanup": JobStatus.SUCCEEDED,
    }
    assert record["cleanup"].result == {"last": "cancelled"}
    events = await jobs.events(enqueued.steps["after"])
    assert events[-1].kind is EventKind.CANCELLED
    assert (
        events[-1].error
        == f"cancelled: it waits for step broke (job {enqueued.steps['broke']}) failed"
    )
    last_error = record["last"].job.last_error
    assert (
        last_error
        == f"cancelled: it waits for step after (job {enqueued.steps['after']}) cancelled"
    )


async def test_at_least_n_of_m_runs_with_the_outcomes_it_got(jobs: Jobs) -> None:
    flow = Workflow("quorum")
    names = ["a", "b", "c", "d"]
    steps = [flow.add(n, boom if n == "b" else append, label=n) for n in names]
    flow.after(*steps, at_least=3).add("enough", statuses)
    flow.after(*steps, at_least=4).add("all", statuses)
    enqueued = await flow.enqueue()
    await jobs.drain()
    record = await jobs.workflow(enqueued.id)
    assert record is not None
    assert record["enough"].result == {
        "a": "succeeded", "b": "failed", "c": "succeeded", "d": "succeeded"
    }  # fmt: skip
    assert record["all"].status is JobStatus.CANCELLED
    assert record["all"].job.last_error == (
        f"cancelled: it waits for step b (job {enqueued.steps['b']}) failed"
    )


async def test_at_least_n_of_m_is_cancelled_once_too_many_failed(jobs: Jobs) -> None:
    flow = Workflow("no quorum")
    steps = [flow.add(n, boom if n in "bc" else append, label=n) for n in "abcd"]
    flow.after(*steps, at_least=3).add("enough", statuses)
    enqueued = await flow.enqueue()
    await jobs.drain()
    assert "statuses" not in ran
    events = await jobs.events(enqueued.steps["enough"])
    assert events[-1].kind is EventKind.CANCELLED
    assert events[-1].error is not None
    assert events[-1].error.startswith(
        "cancelled: 2 of the 4 steps it waits for did not succeed, at most 1 may (latest: step "
    )


async def test_the_cause_named_is_the_failure_past_those_allowed_whatever_the_batch(
    idle: Jobs,
) -> None:
    """Three of the four steps fail in one batch of outcomes, out of order; one failure
    is allowed. PostgreSQL named the failure whose text sorted first and counted all three,
    the memory store named the second it happened to tell and counted two: both name the
    second in id order now, the failure past those allowed, and count to it."""
    flow = Workflow("quorum")
    steps = [flow.add(n, append, label=n) for n in "abcd"]
    flow.after(*steps, at_least=3).add("enough", statuses)
    enqueued = await flow.enqueue(jobs=idle)
    store = idle._ready_store
    claims = {c.id: c for c in await store.claim_batch("default", 10, "w", 30)}
    failed = [enqueued.steps[n] for n in "bca"]  # neither in id order nor in text order
    await store.record_outcomes([ended(claims[i], JobStatus.FAILED, error="broke") for i in failed])
    record = await idle.get(enqueued.steps["enough"])
    assert record is not None
    assert record.last_error == (
        "cancelled: 2 of the 4 steps it waits for did not succeed, at most 1 may (latest: "
        f"step b (job {enqueued.steps['b']}) failed)"
    )


async def test_reading_a_result_a_step_cannot_have_says_why(jobs: Jobs) -> None:
    errors: list[str] = []

    @job(name="wf.reads_wrong")
    async def reads_wrong() -> None:
        me = current_job()
        assert me is not None
        for step, kind in (("nope", int), ("broke", int), ("fine", int)):
            try:
                await me.upstream_result(step, kind)
            except UpstreamStepError as error:
                errors.append(str(error))

    flow = Workflow("wrong")
    broke = flow.add("broke", boom, label="broke")
    fine = flow.add("fine", append, label="fine")
    flow.after(broke, fine, always=True).add("reader", reads_wrong)
    await flow.enqueue()
    await jobs.drain()
    assert len(errors) == 3
    assert "'nope' is not a step it waits for" in errors[0]
    assert "step 'broke' ended failed: it has no result" in errors[1]
    assert "the result of step 'fine' does not fit int" in errors[2]


async def test_the_workflow_shows_its_steps_their_states_and_dependencies(
    idle: Jobs, jobs_dsn: str
) -> None:
    flow = Workflow("shown")
    pdf = flow.add("render", render, order_id=1)
    paid = flow.add("capture", capture, order_id=1, amount=5)
    flow.after(pdf, paid).add("send", send, order_id=1)
    enqueued = await flow.enqueue(jobs=idle)
    before = await idle.workflow(enqueued.id)
    assert before is not None
    assert before.name == "shown"
    assert [s.step for s in before.steps] == ["render", "capture", "send"]
    assert before["send"].waits_for == ("render", "capture")
    assert before["send"].status is JobStatus.WAITING
    assert before["send"].job.workflow_id == enqueued.id
    assert not before.finished
    async with Jobs(jobs_dsn, poll_interval=0.05) as worker:
        await worker.drain()
    after = await idle.workflow(enqueued.id)
    assert after is not None
    assert after.finished
    assert after["render"].result == {"order_id": 1, "pages": 3}
    assert await idle.workflow(enqueued.id + 1000) is None
    assert await idle.workflow(0) is None


async def test_retention_keeps_a_step_while_a_step_that_waits_for_it_is_kept(idle: Jobs) -> None:
    flow = Workflow("kept")
    first = flow.add("first", append, label="first")
    flow.after(first).add("second", append, label="second")
    enqueued = await flow.enqueue(jobs=idle)
    store = idle._ready_store

    async def run_one(expected: str) -> None:
        (claim,) = await store.claim_batch("default", 10, "w", 30)
        assert claim.id == enqueued.steps[expected]
        outcome = Outcome(
            id=claim.id, lease_token=claim.lease_token, status=JobStatus.SUCCEEDED,
            retry_delay=None, error=None, result='"x"',
        )  # fmt: skip
        assert await store.record_outcomes([outcome]) == {claim.id}

    await run_one("first")
    # The first step finished, but the step that waits for it has not run: it is kept.
    assert (await store.prune_finished(0, 100)).deleted == 0
    await run_one("second")
    # A step goes before the steps it waits for: those are kept while it could be retried.
    assert (await store.prune_finished(0, 100)).deleted == 1
    assert await idle.get(enqueued.steps["second"]) is None
    assert (await store.prune_finished(0, 100)).deleted == 1
    assert await idle.get(enqueued.steps["first"]) is None
    assert await idle.workflow(enqueued.id) is None


async def test_retention_keeps_every_step_of_a_workflow_with_a_step_still_to_run(
    idle: Jobs,
) -> None:
    """Two branches: `quick` finished, `slow` is still pending (delayed a week, say). Nothing
    waits for `quick`, yet it stays while `slow` may run: the workflow is shown whole until it
    ends (it used to go with the next round, on both stores). Once `slow` ends, both go."""
    flow = Workflow("branches")
    flow.add("quick", append, label="quick")
    flow.add("slow", append, label="slow")
    enqueued = await flow.enqueue(jobs=idle)
    store = idle._ready_store
    claims = {c.id: c for c in await store.claim_batch("default", 1, "w", 30)}
    quick = enqueued.steps["quick"]
    assert set(claims) == {quick}
    done = Outcome(
        id=quick, lease_token=claims[quick].lease_token, status=JobStatus.SUCCEEDED,
        retry_delay=None, error=None, result='"x"',
    )  # fmt: skip
    assert await store.record_outcomes([done]) == {quick}
    assert (await store.prune_finished(0, 100)).deleted == 0
    shown = await idle.workflow(enqueued.id)
    assert shown is not None
    assert {record.step for record in shown.steps} == {"quick", "slow"}
    assert await idle.cancel(enqueued.steps["slow"])
    assert (await store.prune_finished(0, 100)).deleted == 2
    assert await idle.workflow(enqueued.id) is None


async def test_a_brief_workflow_shows_what_the_whole_one_does_but_the_large_fields(
    idle: Jobs,
) -> None:
    """The dashboard's workflow page and a step's page read the steps brief
    (`get_workflow(brief=True)`): the same steps, statuses and edges, without the arguments a
    store may leave out (PostgreSQL does)."""
    flow = Workflow("large")
    first = flow.add("first", append, label="x" * 300_000)
    flow.after(first).add("second", append, label="y")
    enqueued = await flow.enqueue(jobs=idle)
    store = idle._ready_store
    whole = await store.get_workflow(enqueued.id)
    brief = await store.get_workflow(enqueued.id, brief=True)
    assert whole is not None
    assert brief is not None
    assert whole.steps[0].job.arguments == {"label": "x" * 300_000}
    assert brief.steps[0].job.arguments in ({}, whole.steps[0].job.arguments)
    assert [(s.step, s.waits_for, s.job.id, s.job.status) for s in brief.steps] == [
        (s.step, s.waits_for, s.job.id, s.job.status) for s in whole.steps
    ]
    assert (brief.id, brief.name, brief.statuses) == (whole.id, whole.name, whole.statuses)


async def test_a_failed_step_retried_after_its_upstream_aged_out_still_reads_its_result(
    idle: Jobs,
) -> None:
    """Retention of 0.3 s: the first step finished 0.6 s before the second failed. The first
    is past retention, the second is not, and can be retried: it must find what it waits for."""
    flow = Workflow("aged")
    first = flow.add("first", append, label="first")
    flow.after(first).add("second", append, label="second")
    enqueued = await flow.enqueue(jobs=idle)
    store = idle._ready_store

    async def finish(expected: str, status: JobStatus) -> None:
        (claim,) = await store.claim_batch("default", 10, "w", 30)
        assert claim.id == enqueued.steps[expected]
        if status is JobStatus.FAILED:
            outcome = ended(claim, status, error="broke")
        else:
            outcome = ended(claim, status, result='"made"')
        assert await store.record_outcomes([outcome]) == {claim.id}

    await finish("first", JobStatus.SUCCEEDED)
    await asyncio.sleep(0.6)  # ages the first step's row past the retention below
    await finish("second", JobStatus.FAILED)
    assert (await store.prune_finished(0.3, 100)).deleted == 0
    assert await idle.retry(enqueued.steps["second"])
    (again,) = await store.claim_batch("default", 10, "w", 30)
    assert again.id == enqueued.steps["second"]
    upstream = await store.upstream_results(again.id)
    assert [(step.step, step.status, step.result) for step in upstream] == [
        ("first", JobStatus.SUCCEEDED, '"made"')
    ]


async def test_no_claim_takes_a_waiting_step(idle: Jobs) -> None:
    flow = Workflow("unclaimed")
    first = flow.add("first", append, label="first")
    flow.after(first).add("second", append, label="second")
    enqueued = await flow.enqueue(jobs=idle)
    store = idle._ready_store
    claims = await store.claim_batch("default", 10, "w", 30)
    assert [c.id for c in claims] == [enqueued.steps["first"]]
    assert await store.claim_batch("default", 10, "w", 30) == []
    assert await store.peek_jobs("default", 10, []) == []
    unfinished = await store.count_unfinished(["default"], None, None)
    assert (unfinished.waited, unfinished.scheduled) == (1, 0)  # the running first step


@pytest.mark.parametrize("release", ["release", "release_jobs", "worker's", "unknown claims"])
async def test_a_step_released_after_a_cancel_request_tells_what_waits_for_it(
    idle: Jobs, release: str
) -> None:
    """A running step asked to stop, then given back (an operator's `release`, a shutdown, a
    dead worker's jobs, a claim the worker never heard of) ends cancelled. The steps waiting
    for it stayed waiting until the next upkeep round told them; now the release tells them."""
    flow = Workflow("released")
    first = flow.add("first", append, label="first")
    flow.after(first).add("second", append, label="second")
    enqueued = await flow.enqueue(jobs=idle)
    store = idle._ready_store
    (claim,) = await store.claim_batch("default", 10, "w", 30)
    assert await idle.cancel(claim.id)  # asked to stop: it is running
    if release == "release":
        assert await idle.release(claim.id)
    elif release == "release_jobs":
        assert await store.release_jobs([(claim.id, claim.lease_token)]) == {claim.id}
    elif release == "worker's":
        assert await idle.release_worker_jobs("w") == [claim.id]
    else:
        assert await store.release_unknown_claims("default", "w", []) == [claim.id]
    record = await idle.workflow(enqueued.id)
    assert record is not None
    assert record.statuses == {"first": JobStatus.CANCELLED, "second": JobStatus.CANCELLED}


broken: set[str] = set()


@job(name="wf.flaky", retry=Retry.none())
async def flaky(label: str) -> str:
    ran.append(label)
    if label in broken:
        raise RuntimeError(f"{label} broke")
    return label


async def test_a_manual_retry_of_the_failed_step_resumes_the_rest(jobs: Jobs) -> None:
    broken.add("pay")
    flow = Workflow("resumed")
    pay = flow.add("pay", flaky, label="pay")
    ship = flow.after(pay).add("ship", append, label="ship")
    flow.after(ship).add("mail", append, label="mail")
    flow.after(ship, always=True).add("cleanup", statuses)
    enqueued = await flow.enqueue()
    await jobs.drain()
    record = await jobs.workflow(enqueued.id)
    assert record is not None
    assert record.statuses == {
        "pay": JobStatus.FAILED,
        "ship": JobStatus.CANCELLED,
        "mail": JobStatus.CANCELLED,
        "cleanup": JobStatus.SUCCEEDED,
    }
    broken.clear()
    assert await jobs.retry(enqueued.steps["pay"])
    await jobs.drain()
    done = await jobs.workflow(enqueued.id)
    assert done is not None
    assert set(done.statuses.values()) == {JobStatus.SUCCEEDED}
    assert ran.count("ship") == 1
    assert ran.count("mail") == 1
    assert done["ship"].job.last_error is None
    kinds = [event.kind for event in await jobs.events(enqueued.steps["mail"])]
    assert kinds == [
        EventKind.ENQUEUED, EventKind.CANCELLED, EventKind.WAITING, EventKind.READY,
        EventKind.CLAIMED, EventKind.SUCCEEDED,
    ]  # fmt: skip


async def test_retrying_a_step_recounts_a_clean_up_step_still_waiting(idle: Jobs) -> None:
    flow = Workflow("recounted")
    a = flow.add("a", flaky, label="a")
    b = flow.add("b", flaky, label="b")
    flow.after(a, b, always=True).add("cleanup", statuses)
    enqueued = await flow.enqueue(jobs=idle)
    store = idle._ready_store
    claims = {c.id: c for c in await store.claim_batch("default", 10, "w", 30)}
    a_claim = claims[enqueued.steps["a"]]
    failed = Outcome(
        id=a_claim.id, lease_token=a_claim.lease_token, status=JobStatus.FAILED,
        retry_delay=None, error="no", result=None,
    )  # fmt: skip
    await store.record_outcomes([failed])
    assert await idle.retry(enqueued.steps["a"])
    # "a" runs again; "b" never finished: the clean-up step waits for both once more.
    for claim in await store.claim_batch("default", 10, "w", 30) + [claims[enqueued.steps["b"]]]:
        ok = Outcome(
            id=claim.id, lease_token=claim.lease_token, status=JobStatus.SUCCEEDED,
            retry_delay=None, error=None, result=None,
        )  # fmt: skip
        assert await store.record_outcomes([ok]) == {claim.id}
        if claim.id == enqueued.steps["a"]:
            assert await store.job_status(enqueued.steps["cleanup"]) is JobStatus.WAITING
    assert await store.job_status(enqueued.steps["cleanup"]) is JobStatus.PENDING


async def test_cancelling_a_waiting_step_cancels_what_waits_for_it(
    idle: Jobs, jobs_dsn: str
) -> None:
    flow = Workflow("cut")
    slow = flow.add("slow", append, label="slow")
    middle = flow.after(slow).add("middle", append, label="middle")
    flow.after(middle).add("end", append, label="end")
    flow.after(middle, always=True).add("cleanup", statuses)
    enqueued = await flow.enqueue(jobs=idle)
    assert await idle.cancel(enqueued.steps["middle"])
    async with Jobs(jobs_dsn, poll_interval=0.05) as worker:
        await worker.drain()
    record = await idle.workflow(enqueued.id)
    assert record is not None
    assert record.statuses == {
        "slow": JobStatus.SUCCEEDED,
        "middle": JobStatus.CANCELLED,
        "end": JobStatus.CANCELLED,
        "cleanup": JobStatus.SUCCEEDED,
    }
    assert record["end"].job.last_error == (
        f"cancelled: it waits for step middle (job {enqueued.steps['middle']}) cancelled"
    )


started_gates: list[asyncio.Event] = []  # one per test: an event belongs to one loop


@job(name="wf.held", retry=Retry.none())
async def held() -> str:
    started_gates[-1].set()
    try:
        await asyncio.Event().wait()
    except asyncio.CancelledError:
        return "stopped"
    return "never"


async def test_cancelling_a_workflow_cancels_every_step_not_finished(jobs: Jobs) -> None:
    started_gates.append(asyncio.Event())
    flow = Workflow("cancelled")
    first = flow.add("first", append, label="first")
    running = flow.after(first).add("running", held)
    flow.after(running).add("later", append, label="later")
    flow.after(running, always=True).add("cleanup", statuses)
    enqueued = await flow.enqueue()
    await asyncio.wait_for(started_gates[-1].wait(), 10)
    assert await jobs.cancel_workflow(enqueued.id) == 3
    await jobs.drain()
    record = await jobs.workflow(enqueued.id)
    assert record is not None
    assert record.statuses == {
        "first": JobStatus.SUCCEEDED,
        "running": JobStatus.CANCELLED,
        "later": JobStatus.CANCELLED,
        "cleanup": JobStatus.CANCELLED,
    }
    assert record["running"].result == "stopped"
    assert record["later"].job.last_error == "cancelled: its workflow was cancelled"
    assert ran == ["first"]
    assert await jobs.cancel_workflow(enqueued.id) == 0


async def test_a_retried_step_puts_the_steps_it_cancelled_back_to_waiting(idle: Jobs) -> None:
    flow = Workflow("reopened")
    pay = flow.add("pay", flaky, label="pay")
    ship = flow.after(pay).add("ship", append, label="ship")
    flow.after(ship).add("mail", append, label="mail")
    enqueued = await flow.enqueue(jobs=idle)
    store = idle._ready_store
    (claim,) = await store.claim_batch("default", 10, "w", 30)
    failed = Outcome(
        id=claim.id, lease_token=claim.lease_token, status=JobStatus.FAILED,
        retry_delay=None, error="no", result=None,
    )  # fmt: skip
    await store.record_outcomes([failed])
    record = await idle.workflow(enqueued.id)
    assert record is not None
    assert (record.statuses["ship"], record.statuses["mail"]) == (JobStatus.CANCELLED,) * 2
    assert await idle.retry(enqueued.steps["pay"])
    again = await idle.workflow(enqueued.id)
    assert again is not None
    assert again.statuses == {
        "pay": JobStatus.PENDING, "ship": JobStatus.WAITING, "mail": JobStatus.WAITING
    }  # fmt: skip
    assert again["ship"].job.last_error is None
    assert (await store.job_events(enqueued.steps["mail"]))[-1].kind is EventKind.WAITING
    assert not await idle.retry(enqueued.steps["ship"])  # waiting: nothing to retry


async def test_a_step_cancelled_while_it_waited_waits_again_when_retried(idle: Jobs) -> None:
    """`jobs.retry` of a step an operator cancelled while the step it waits for ran: it does
    not run at once (it would find that step unfinished and fail for good), it waits for it
    again, and runs once it has succeeded."""
    flow = Workflow("cancelled while waiting")
    render = flow.add("render", flaky, label="render")
    flow.after(render).add("send", append, label="send")
    enqueued = await flow.enqueue(jobs=idle)
    store = idle._ready_store
    (claim,) = await store.claim_batch("default", 10, "w", 30)
    assert await idle.cancel(enqueued.steps["send"])
    assert await idle.retry(enqueued.steps["send"])
    assert await store.job_status(enqueued.steps["send"]) is JobStatus.WAITING
    assert await store.claim_batch("default", 10, "w", 30) == []
    succeeded = Outcome(
        id=claim.id, lease_token=claim.lease_token, status=JobStatus.SUCCEEDED,
        retry_delay=None, error=None, result="1",
    )  # fmt: skip
    await store.record_outcomes([succeeded])
    assert await store.job_status(enqueued.steps["send"]) is JobStatus.PENDING


async def test_a_step_whose_upstream_failed_is_not_retried_before_that_step(idle: Jobs) -> None:
    """A step cancelled by hand while it waited for two steps; one of them then failed for
    good, the other still runs. Retrying it, alone or in bulk, would run it without what it
    waits for: refused, until the failed step is retried and succeeds."""
    flow = Workflow("upstream failed since")
    one, two = flow.add("one", flaky, label="one"), flow.add("two", flaky, label="two")
    flow.after(one, two).add("send", append, label="send")
    enqueued = await flow.enqueue(jobs=idle)
    store = idle._ready_store
    claims = {c.id: c for c in await store.claim_batch("default", 10, "w", 30)}
    assert await idle.cancel(enqueued.steps["send"])
    failed = claims[enqueued.steps["one"]]
    await store.record_outcomes([ended(failed, JobStatus.FAILED, error="broke")])
    await store.settle_steps()
    assert not await idle.retry(enqueued.steps["send"])
    record = await idle.begin_bulk("retry", queue="default", status="cancelled", by="ada")
    assert record.matched == 0
    await idle.run_bulk(record.id)
    assert await store.job_status(enqueued.steps["send"]) is JobStatus.CANCELLED
    assert await store.claim_batch("default", 10, "w", 30) == []
    # Once that step is retried and succeeds, so is this one, and it runs after both.
    assert await idle.retry(enqueued.steps["one"])
    for claim in [*await store.claim_batch("default", 10, "w", 30), claims[enqueued.steps["two"]]]:
        await store.record_outcomes([ended(claim, JobStatus.SUCCEEDED, result='"ok"')])
    assert await idle.retry(enqueued.steps["send"])
    (sent,) = await store.claim_batch("default", 10, "w", 30)
    assert sent.id == enqueued.steps["send"]


async def test_a_bulk_retry_of_a_step_cancelled_while_it_waited_waits_again(idle: Jobs) -> None:
    """The same through a bulk retry of the queue's cancelled jobs (the dashboard's action)."""
    flow = Workflow("bulk-cancelled while waiting")
    render = flow.add("render", flaky, label="render")
    flow.after(render).add("send", append, label="send")
    enqueued = await flow.enqueue(jobs=idle)
    store = idle._ready_store
    (claim,) = await store.claim_batch("default", 10, "w", 30)
    assert await idle.cancel(enqueued.steps["send"])
    record = await idle.begin_bulk("retry", queue="default", status="cancelled", by="ada")
    after = await store.bulk_batch(record.id, 10)
    assert after is not None
    assert after.done == 1
    assert await store.job_status(enqueued.steps["send"]) is JobStatus.WAITING
    assert await store.claim_batch("default", 10, "w", 30) == []
    retried = (await idle.events(enqueued.steps["send"]))[-1]
    assert (retried.kind, retried.status, retried.by) == (
        EventKind.RETRIED, JobStatus.WAITING, "ada"
    )  # fmt: skip
    await store.record_outcomes([ended(claim, JobStatus.SUCCEEDED, result="1")])
    assert await store.job_status(enqueued.steps["send"]) is JobStatus.PENDING
    (sent,) = await store.claim_batch("default", 10, "w", 30)
    assert sent.id == enqueued.steps["send"]


async def test_a_failure_cancels_a_chain_of_1500_steps_to_its_end(idle: Jobs) -> None:
    flow = Workflow("long chain")
    steps = flow.add_many("s", flaky, [{"label": str(n)} for n in range(1500)])
    flow.chain(*steps)
    enqueued = await flow.enqueue(jobs=idle)
    store = idle._ready_store
    (claim,) = await store.claim_batch("default", 10, "w", 30)
    failed = Outcome(
        id=claim.id, lease_token=claim.lease_token, status=JobStatus.FAILED,
        retry_delay=None, error="no", result=None,
    )  # fmt: skip
    await store.record_outcomes([failed])
    last = await idle.get(enqueued.steps["s[1499]"])
    assert last is not None
    assert last.status is JobStatus.CANCELLED
    assert last.last_error == (
        f"cancelled: it waits for step s[1498] (job {enqueued.steps['s[1498]']}) cancelled"
    )
    assert (await idle.count_by_status())[JobStatus.CANCELLED] == 1499


async def test_a_step_another_failure_cancelled_stays_cancelled_on_a_retry(idle: Jobs) -> None:
    flow = Workflow("two failures")
    a = flow.add("a", flaky, label="a")
    b = flow.add("b", flaky, label="b")
    flow.after(a, b).add("both", append, label="both")
    enqueued = await flow.enqueue(jobs=idle)
    store = idle._ready_store
    for claim in await store.claim_batch("default", 10, "w", 30):
        failed = Outcome(
            id=claim.id, lease_token=claim.lease_token, status=JobStatus.FAILED,
            retry_delay=None, error="no", result=None,
        )  # fmt: skip
        await store.record_outcomes([failed])
    assert await idle.retry(enqueued.steps["a"])
    both = await idle.get(enqueued.steps["both"])
    assert both is not None
    assert both.status is JobStatus.CANCELLED  # "b" failed too
    assert await idle.retry(enqueued.steps["b"])
    again = await idle.get(enqueued.steps["both"])
    assert again is not None
    assert again.status is JobStatus.WAITING
