"""How long jobs hold the event loop (`_loop_time`): each step of an `async def` job timed, a sync
job's thread counted whole, and the awaitable passing on what `await` would (values, errors,
cancellation, closing). What the guard does with it: test_loop_lag.py."""

from __future__ import annotations

import asyncio
import math
import threading
import time
import traceback
from collections.abc import Awaitable
from typing import TypeVar

import pytest

from starlette_jobs.worker import _loop_time as _loop_time
from starlette_jobs.worker._loop_time import JobLoopTime, timed

T = TypeVar("T")


async def awaiting(awaitable: Awaitable[T]) -> T:
    """A coroutine that awaits `awaitable`, as the worker's task does: a task needs one."""
    return await awaitable


async def test_each_step_is_timed_and_the_awaits_between_them_are_not() -> None:
    loop_time = JobLoopTime()

    async def job() -> str:
        time.sleep(0.02)  # holds the loop  # noqa: ASYNC251
        await asyncio.sleep(0.1)  # leaves it free
        time.sleep(0.02)  # noqa: ASYNC251
        return "done"

    assert await timed(job(), loop_time) == "done"
    held = loop_time.take()
    assert 0.04 <= held < 0.09
    assert loop_time.take() == 0.0  # taken: the next interval starts from nothing


async def test_what_the_job_awaits_gets_its_value_and_its_error() -> None:
    loop_time = JobLoopTime()
    loop = asyncio.get_running_loop()
    answer: asyncio.Future[int] = loop.create_future()
    failure: asyncio.Future[int] = loop.create_future()

    async def job() -> int:
        value = await answer
        try:
            await failure
        except KeyError:
            return value + 1
        raise AssertionError("the error did not reach the job")

    task = asyncio.create_task(awaiting(timed(job(), loop_time)))
    await asyncio.sleep(0)
    answer.set_result(41)
    await asyncio.sleep(0)
    failure.set_exception(KeyError("lost"))
    assert await task == 42


async def test_an_error_of_the_job_is_raised_and_its_time_counted() -> None:
    loop_time = JobLoopTime()

    async def job() -> None:
        time.sleep(0.01)  # noqa: ASYNC251
        raise ValueError("bad")

    with pytest.raises(ValueError, match="bad"):
        await timed(job(), loop_time)
    assert loop_time.take() >= 0.01


async def test_cancelling_reaches_the_job_which_may_catch_it_or_not() -> None:
    loop_time = JobLoopTime()
    cleaned_up = []

    async def stubborn() -> str:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            return "partial"
        return "full"

    async def plain() -> None:
        try:
            await asyncio.sleep(3600)
        finally:
            cleaned_up.append(True)

    caught = asyncio.create_task(awaiting(timed(stubborn(), loop_time)))
    cancelled = asyncio.create_task(awaiting(timed(plain(), loop_time)))
    await asyncio.sleep(0)
    caught.cancel()
    cancelled.cancel()
    assert await caught == "partial"
    with pytest.raises(asyncio.CancelledError):
        await cancelled
    assert cleaned_up == [True]


async def test_closing_the_awaitable_closes_the_job() -> None:
    loop_time = JobLoopTime()
    closed = []

    async def job() -> None:
        try:
            await asyncio.sleep(3600)
        finally:
            closed.append(True)

    steps = timed(job(), loop_time).__await__()
    next(steps)  # suspended in the sleep
    steps.close()
    assert closed == [True]


async def test_a_sync_jobs_thread_counts_whole_from_its_start_to_its_end() -> None:
    loop_time = JobLoopTime()
    started = threading.Event()
    release = threading.Event()

    def compute() -> str:
        started.set()
        release.wait(10)
        return "done"

    task = asyncio.create_task(asyncio.to_thread(loop_time.counting_thread(compute)))
    await asyncio.to_thread(started.wait, 10)
    await asyncio.sleep(0)  # the thread's word that it started reaches the loop
    assert loop_time.take() == math.inf
    assert loop_time.take() == math.inf  # still running
    release.set()
    assert await task == "done"
    await asyncio.sleep(0)  # its word that it ended
    assert loop_time.take() == math.inf  # it ended in this interval
    assert loop_time.take() == 0.0


async def test_a_thread_left_running_by_a_cancelled_job_counts_until_it_ends() -> None:
    loop_time = JobLoopTime()
    started = threading.Event()
    release = threading.Event()

    def compute() -> None:
        started.set()
        release.wait(10)

    task = asyncio.create_task(asyncio.to_thread(loop_time.counting_thread(compute)))
    await asyncio.to_thread(started.wait, 10)
    task.cancel()  # as the job's timeout would: the thread cannot be stopped
    with pytest.raises(asyncio.CancelledError):
        await task
    assert loop_time.take() == math.inf
    release.set()
    while loop_time.threads:  # the thread's word that it ended  # noqa: ASYNC110
        await asyncio.sleep(0.001)
    loop_time.take()
    assert loop_time.take() == 0.0


async def test_an_error_thrown_into_the_job_shows_no_frame_of_the_timing() -> None:
    loop_time = JobLoopTime()
    failure: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    seen: list[BaseException] = []

    async def job() -> None:
        try:
            await failure
        except ConnectionError as error:
            seen.append(error)

    task = asyncio.create_task(awaiting(timed(job(), loop_time)))
    await asyncio.sleep(0)
    failure.set_exception(ConnectionError("database down"))
    await task
    files = [frame.filename for frame in traceback.extract_tb(seen[0].__traceback__)]
    assert _loop_time.__file__ not in files
    assert files[0] == __file__  # where the job awaited
