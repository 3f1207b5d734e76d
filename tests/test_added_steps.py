"""`_added_steps.py`: the builder a running step adds steps with, checked before anything is
written, and what the stores do with steps named as ones already in the workflow."""

from __future__ import annotations

import pytest

from starlette_jobs import AddedSteps, JobArgumentsError, WorkflowDefinitionError, job
from starlette_jobs._workflow_records import EnqueuedWorkflow, NewStep, NewWorkflow, split_added


@job(name="tests.added.double")
async def double(n: int) -> int:
    return 2 * n


def new(*steps: NewStep) -> list[NewStep]:
    return list(steps)


def step(name: str, *upstream: int, payload: str = '{"n": 1}') -> NewStep:
    return NewStep(
        step=name, name="tests.added.double", queue="default", payload=payload, priority=0,
        max_attempts=1, upstream=upstream, allowed_failures=0,
    )  # fmt: skip


async def test_the_steps_are_written_through_the_adder_once_checked() -> None:
    written: list[NewWorkflow] = []

    async def add(steps: NewWorkflow) -> EnqueuedWorkflow:
        written.append(steps)
        return EnqueuedWorkflow(1, {name: i for i, name in enumerate(steps.steps)})

    more = AddedSteps(7, add)
    first = more.add("a", double, n=1)
    more.after(first).add("b", double, n=2)
    assert await more.enqueue() == EnqueuedWorkflow(1, {"a": 0, "b": 1})
    assert [(s.step, s.upstream, s.payload) for s in written[0].step_records()] == [
        ("a", (), '{"n":1}'),
        ("b", (0,), '{"n":2}'),
    ]


async def test_invalid_steps_are_refused_before_anything_is_written() -> None:
    async def add(steps: NewWorkflow) -> EnqueuedWorkflow:
        raise AssertionError("nothing may be written")

    more = AddedSteps(7, add)
    with pytest.raises(JobArgumentsError):
        more.add("a", double, n="not a number")  # type: ignore[call-overload]
    more.after("b").add("a", double, n=1)
    more.after("a").add("b", double, n=2)
    with pytest.raises(WorkflowDefinitionError, match="cycle"):
        await more.enqueue()
    with pytest.raises(WorkflowDefinitionError, match="has no step"):
        await AddedSteps(7, add).enqueue()
    with pytest.raises(TypeError, match="neither connection= nor jobs="):
        await more.enqueue(connection=object())  # type: ignore[arg-type]


def test_steps_of_new_names_are_all_inserted() -> None:
    steps = new(step("a"), step("b", 0))
    assert split_added(steps, 3, {}) == (steps, {})


def test_a_step_added_again_with_the_same_job_and_arguments_is_kept() -> None:
    steps = new(step("a"), step("b", 0), step("c"))
    existing = {
        "a": (40, "tests.added.double", '{"n": 1}'),
        "b": (41, "tests.added.double", '{"n":1}'),
    }
    inserted, kept = split_added(steps, 3, existing)
    assert kept == {"a": 40, "b": 41}
    assert [(s.step, s.upstream) for s in inserted] == [("c", ())]


def test_a_name_taken_by_other_arguments_or_job_is_refused() -> None:
    with pytest.raises(WorkflowDefinitionError, match=r"has a step 'a' already \(job 40"):
        split_added(new(step("a")), 3, {"a": (40, "tests.added.double", '{"n": 2}')})
    with pytest.raises(WorkflowDefinitionError, match="other arguments"):
        split_added(new(step("a")), 3, {"a": (40, "tests.other", '{"n": 1}')})


def test_a_new_step_may_not_wait_for_one_kept() -> None:
    existing = {"a": (40, "tests.added.double", '{"n": 1}')}
    with pytest.raises(WorkflowDefinitionError, match="'b' waits for 'a', which was added before"):
        split_added(new(step("a"), step("b", 0)), 3, existing)
