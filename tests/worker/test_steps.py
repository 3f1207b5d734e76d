"""`worker/_steps.py`: whether an attempt's job is a workflow's step, asked only when its result
cannot be stored (when the store cannot say, the attempt fails rather than lose the result),
and the builder of steps a step adds, bound to its attempt's lease token."""

from __future__ import annotations

from uuid import UUID, uuid4

import pytest

from starlette_jobs import WorkflowDefinitionError, job
from starlette_jobs._attempt_records import Claim
from starlette_jobs._errors import DatabaseUnavailableError
from starlette_jobs._workflow_records import EnqueuedWorkflow, NewWorkflow
from starlette_jobs.worker._steps import added_steps, is_step


@job(name="tests.steps.noop")
async def noop(n: int) -> int:
    return n


class Steps:
    def __init__(self, workflow_id: int | None = None, *, down: bool = False) -> None:
        self.workflow_id, self.down = workflow_id, down
        self.asked: list[int] = []
        self.added: list[tuple[int, UUID, NewWorkflow]] = []

    async def workflow_of(self, job_id: int) -> int | None:
        self.asked.append(job_id)
        if self.down:
            raise DatabaseUnavailableError("down")
        return self.workflow_id

    async def add_steps(self, job_id: int, lease_token: UUID, new: NewWorkflow) -> EnqueuedWorkflow:
        self.added.append((job_id, lease_token, new))
        return EnqueuedWorkflow(9, {name: 100 + i for i, name in enumerate(new.steps)})


async def test_a_job_of_a_workflow_is_a_step() -> None:
    steps = Steps(workflow_id=3)
    assert await is_step(steps, 7)
    assert steps.asked == [7]


async def test_a_job_of_no_workflow_is_not() -> None:
    assert not await is_step(Steps(), 7)


async def test_a_store_that_cannot_say_counts_as_a_step() -> None:
    assert await is_step(Steps(down=True), 7)


async def test_outside_a_worker_nothing_is_a_step() -> None:
    assert not await is_step(None, 7)


def claim(job_id: int) -> Claim:
    return Claim(job_id, "tests.steps.noop", "default", "{}", 1, 3, uuid4(), None)


async def test_steps_are_added_under_the_attempts_lease_token() -> None:
    steps, claimed = Steps(workflow_id=9), claim(5)
    more = added_steps(steps, 5, claimed)
    more.add("a", noop, n=1)
    more.after("a").add("b", noop, n=2)
    assert await more.enqueue() == EnqueuedWorkflow(9, {"a": 100, "b": 101})
    ((job_id, token, new),) = steps.added
    assert (job_id, token) == (5, claimed.lease_token)
    assert [(s.step, s.upstream) for s in new.step_records()] == [("a", ()), ("b", (0,))]


async def test_the_steps_are_checked_before_the_store_is_asked() -> None:
    steps = Steps(workflow_id=9)
    more = added_steps(steps, 5, claim(5))
    more.after("render").add("b", noop, n=2)  # a step of the workflow, not added with it
    with pytest.raises(WorkflowDefinitionError, match="'render', which is not a step"):
        await more.enqueue()
    assert steps.added == []


async def test_outside_a_worker_there_is_no_workflow_to_add_to() -> None:
    more = added_steps(None, 5, None)
    more.add("a", noop, n=1)
    with pytest.raises(WorkflowDefinitionError, match="job 5 runs outside a worker"):
        await more.enqueue()
