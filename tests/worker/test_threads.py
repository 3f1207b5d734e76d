"""`_threads`: a sync job's thread is counted from the moment it starts its function until the
event loop hears it returned, and those waiting are told (what shutdown does with the count:
test_shutdown.py and test_worker.py)."""

from __future__ import annotations

import asyncio
import threading

from starlette_jobs.worker._threads import (
    job_threads_running,
    told_when_a_thread_returns,
    tracked,
)


async def test_a_thread_is_counted_while_it_runs_and_its_return_is_told() -> None:
    started, let_go = threading.Event(), threading.Event()

    def work() -> str:
        started.set()
        let_go.wait(10)
        return "done"

    before = job_threads_running()
    returned = asyncio.Event()
    with told_when_a_thread_returns(returned.set):
        running = asyncio.create_task(asyncio.to_thread(tracked(work)))
        assert await asyncio.to_thread(started.wait, 10)
        assert job_threads_running() == before + 1
        let_go.set()
        await returned.wait()
        assert job_threads_running() == before
        assert await running == "done"


async def test_a_thread_whose_awaiting_task_was_cancelled_still_counts_until_it_returns() -> None:
    started, let_go = threading.Event(), threading.Event()

    def work() -> None:
        started.set()
        let_go.wait(10)

    before = job_threads_running()
    running = asyncio.create_task(asyncio.to_thread(tracked(work)))
    assert await asyncio.to_thread(started.wait, 10)
    running.cancel()
    await asyncio.gather(running, return_exceptions=True)
    assert job_threads_running() == before + 1  # the thread runs on: nothing can stop it
    returned = asyncio.Event()
    with told_when_a_thread_returns(returned.set):
        let_go.set()
        await returned.wait()
    assert job_threads_running() == before
