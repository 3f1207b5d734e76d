"""`worker/_steps.py`: whether an attempt's job is a workflow's step, asked only when its result
cannot be stored; when the store cannot say, the attempt fails rather than lose the result."""

from __future__ import annotations

from starlette_jobs._errors import DatabaseUnavailableError
from starlette_jobs.worker._steps import is_step


class Steps:
    def __init__(self, workflow_id: int | None = None, *, down: bool = False) -> None:
        self.workflow_id, self.down = workflow_id, down
        self.asked: list[int] = []

    async def workflow_of(self, job_id: int) -> int | None:
        self.asked.append(job_id)
        if self.down:
            raise DatabaseUnavailableError("down")
        return self.workflow_id


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
