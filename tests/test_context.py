"""`current_job()` (`_context`): the running job inside its attempt, None outside one, and each
task sees its own."""

from __future__ import annotations

import asyncio

import pytest

from starlette_jobs import RunningJob, current_job
from starlette_jobs._context import running

FIRST = RunningJob(id=1, name="app.first", queue="default", attempt=1, max_attempts=3)
SECOND = RunningJob(id=2, name="app.second", queue="emails", attempt=2, max_attempts=2)


def test_outside_a_job_there_is_no_current_job() -> None:
    assert current_job() is None


def test_the_job_is_current_within_the_block_and_no_longer_after() -> None:
    with running(FIRST):
        assert current_job() is FIRST
    assert current_job() is None


def test_blocks_nest_and_each_restores_the_one_before() -> None:
    with running(FIRST):
        with running(SECOND):
            assert current_job() is SECOND
        assert current_job() is FIRST
    assert current_job() is None


def test_an_exception_in_the_block_still_restores_the_previous_job() -> None:
    with pytest.raises(ZeroDivisionError), running(FIRST):
        1 / 0  # noqa: B018
    assert current_job() is None


async def test_concurrent_attempts_each_see_their_own_job() -> None:
    both_inside = asyncio.Barrier(2)

    async def attempt(me: RunningJob) -> RunningJob | None:
        with running(me):
            await both_inside.wait()  # the other task has entered its own block meanwhile
            return current_job()

    assert list(await asyncio.gather(attempt(FIRST), attempt(SECOND))) == [FIRST, SECOND]


def test_a_running_job_is_read_only() -> None:
    with pytest.raises(AttributeError):
        FIRST.attempt = 2  # type: ignore[misc]
