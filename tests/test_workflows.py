"""`Workflow`: what it checks before anything is written (arguments as each step is added, the
graph at enqueue), and the order and policies of the steps it hands the store."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from starlette_jobs import (
    JobArgumentsError,
    JobDefinitionError,
    Jobs,
    JobStatus,
    Workflow,
    WorkflowDefinitionError,
    job,
)


@job(name="unit.step")
async def step_job(n: int) -> int:
    return n


@job(name="unit.other", queue="others")
async def other_job() -> None:
    return None


@pytest.fixture
async def jobs() -> AsyncIterator[Jobs]:
    async with Jobs("memory://", queues={}) as started:
        yield started


def order(flow: Workflow) -> list[tuple[str, tuple[int, ...], int]]:
    new = flow._new_workflow(None)
    return [
        (step, tuple(new.upstream.get(i, ())), new.allowed_failures.get(i, 0))
        for i, step in enumerate(new.steps)
    ]


def test_steps_come_after_those_they_wait_for_with_their_policies() -> None:
    flow = Workflow("w")
    flow.after("b", "c").add("a", step_job, n=1)
    b = flow.add("b", step_job, n=2)
    flow.after(b).add("c", step_job, n=3)
    flow.after("a", "b", "c", always=True).add("d", step_job, n=4)
    flow.after("a", "b", "c", at_least=1).add("e", step_job, n=5)
    assert order(flow) == [
        ("b", (), 0),
        ("c", (0,), 0),
        ("a", (0, 1), 0),
        ("d", (0, 1, 2), 3),  # runs whatever their outcome
        ("e", (0, 1, 2), 2),  # 1 of 3 must succeed: 2 may fail
    ]


def test_chain_and_add_many_make_the_edges_they_say() -> None:
    flow = Workflow("w")
    parts = flow.add_many("p", step_job, [{"n": n} for n in range(3)])
    assert [p.name for p in parts] == ["p[0]", "p[1]", "p[2]"]
    flow.chain(*parts)
    flow.chain("p[1]", "p[2]")  # again: no edge twice
    assert order(flow) == [("p[0]", (), 0), ("p[1]", (0,), 0), ("p[2]", (1,), 0)]
    with pytest.raises(WorkflowDefinitionError, match="chain\\(\\): no step named 'x'"):
        flow.chain("p[0]", "x")


def test_chain_refuses_a_step_that_waits_for_at_least_n_and_extends_a_clean_up_step() -> None:
    flow = Workflow("w")
    a, b, p = (flow.add(name, step_job, n=1) for name in ("a", "b", "p"))
    flow.after(a, b, at_least=1).add("x", step_job, n=2)
    # p would be one more step of which one must succeed: p's failure would not stop x.
    with pytest.raises(WorkflowDefinitionError, match="'x' waits for at least 1 of 2 steps"):
        flow.chain(p, "x")
    flow.after(a, b, always=True).add("cleanup", step_job, n=3)
    flow.chain(p, "cleanup")  # a clean-up step waits for p as well, whatever its outcome
    flow.after(a, b, at_least=0).add("any", step_job, n=4)
    flow.chain(p, "any")  # as always=True
    assert order(flow)[3:] == [
        ("x", (0, 1), 1), ("cleanup", (0, 1, 2), 3), ("any", (0, 1, 2), 3),
    ]  # fmt: skip


def test_a_cycle_is_named() -> None:
    flow = Workflow("w")
    flow.after("c").add("a", step_job, n=1)
    flow.after("a").add("b", step_job, n=2)
    flow.after("b").add("c", step_job, n=3)
    with pytest.raises(WorkflowDefinitionError, match="a -> c -> b -> a"):
        flow._new_workflow(None)


def test_a_step_waiting_for_itself_is_a_cycle() -> None:
    flow = Workflow("w")
    flow.after("a").add("a", step_job, n=1)
    with pytest.raises(WorkflowDefinitionError, match=r"cycle .*: a -> a"):
        flow._new_workflow(None)


def test_a_long_chain_is_ordered_without_recursion() -> None:
    flow = Workflow("w")
    steps = flow.add_many("s", step_job, [{"n": n} for n in range(5000)])
    flow.chain(*reversed(steps))  # declared last first
    names = [s[0] for s in order(flow)]
    assert names == [f"s[{n}]" for n in reversed(range(5000))]


def test_bad_arguments_are_refused_when_the_step_is_added_naming_it() -> None:
    flow = Workflow("w")
    with pytest.raises(JobArgumentsError) as caught:
        flow.add("first", step_job, n="not a number")  # type: ignore[call-overload]
    assert caught.value.errors[0]["loc"] == ("first", "n")
    with pytest.raises(JobArgumentsError):
        flow.add_many("p", step_job, [{"n": 1}, {"m": 2}])


@pytest.mark.parametrize(
    ("declare", "message"),
    [
        (lambda f: f.add("x y", step_job, n=1), "invalid step name 'x y'"),
        (lambda f: f.add("a", print, n=1), "is not a @job function"),
        (lambda f: f.add("a", step_job.configure(priority=5), n=1), "pass the @job function"),
        (lambda f: f.add_many("p", step_job.configure(), [{"n": 1}]), "cannot be a step"),
        (lambda f: (f.add("a", step_job, n=1), f.add("a", step_job, n=2)), "two steps named"),
        (
            lambda f: (f.add("p[1]", step_job, n=1), f.add_many("p", step_job, [{"n": 2}] * 3)),
            "two steps named 'p\\[1\\]'",
        ),
        (lambda f: f.add_many("p p", step_job, [{"n": 1}]), "invalid step name 'p p\\[0\\]'"),
        (lambda f: f.add_many("p" * 197, step_job, [{"n": 1}] * 11), "invalid step name"),
        (lambda f: f.after(), "needs at least one step"),
        (lambda f: f.after("a", "a"), "names a step twice"),
        (lambda f: f.after("a", always=True, at_least=1), "not both"),
        (lambda f: f.after("a", at_least=2), "at_least=2 of 1 steps can never be met"),
        (lambda f: f.after("a", at_least=-1), "at_least must be an int >= 0"),
        (lambda f: f.after("a", at_least=True), "at_least must be an int >= 0"),
    ],
)
def test_what_cannot_be_declared_is_refused_at_once(declare: object, message: str) -> None:
    with pytest.raises(WorkflowDefinitionError, match=message):
        declare(Workflow("w"))  # type: ignore[operator]


def test_a_fan_in_reaches_the_store_as_columns_each_job_once() -> None:
    flow = Workflow("w")
    parts = flow.add_many("p", step_job, [{"n": n} for n in range(3)])
    flow.after(*parts, at_least=2).add("sum", other_job)
    new = flow._new_workflow(None)
    assert list(new.steps) == ["p[0]", "p[1]", "p[2]", "sum"]
    assert list(new.payloads) == ['{"n":0}', '{"n":1}', '{"n":2}', "{}"]
    assert [job.name for job in new.jobs] == ["unit.step", "unit.other"]
    assert list(new.job_of) == [0, 0, 0, 1]
    assert new.upstream == {3: [0, 1, 2]}
    assert new.allowed_failures == {3: 1}
    assert new.queue_of(3) == other_job.queue


def test_a_workflow_needs_a_name_and_a_step() -> None:
    with pytest.raises(WorkflowDefinitionError, match="1 to 200 characters"):
        Workflow("")
    with pytest.raises(WorkflowDefinitionError, match="has no step"):
        Workflow("empty")._new_workflow(None)
    assert issubclass(WorkflowDefinitionError, JobDefinitionError)
    assert repr(Workflow("w")) == "<Workflow w steps=[]>"


async def test_an_invalid_graph_writes_nothing(jobs: Jobs) -> None:
    flow = Workflow("w")
    flow.add("a", step_job, n=1)
    flow.after("a", "missing").add("b", step_job, n=2)
    with pytest.raises(WorkflowDefinitionError, match="waits for 'missing', which is not a step"):
        await flow.enqueue(jobs=jobs)
    assert (await jobs.count_by_status()) == dict.fromkeys(JobStatus, 0)


async def test_a_valid_graph_is_written_whole(jobs: Jobs) -> None:
    flow = Workflow("w")
    a = flow.add("a", step_job, n=1)
    flow.after(a).add("b", step_job, n=2)
    enqueued = await flow.enqueue(jobs=jobs)
    counts = await jobs.count_by_status()
    assert (counts[JobStatus.PENDING], counts[JobStatus.WAITING]) == (1, 1)
    assert list(enqueued.steps) == ["a", "b"]
    b = await jobs.get(enqueued.steps["b"])
    assert b is not None
    assert (b.step, b.workflow_id, b.arguments) == ("b", enqueued.id, {"n": 2})
