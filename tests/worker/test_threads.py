"""`_threads`: a sync job's thread is counted from the moment it starts its function until the
event loop hears it returned, and those waiting are told (what shutdown does with the count:
test_shutdown.py and test_worker.py)."""

from __future__ import annotations

import asyncio
import threading

from starlette_jobs.worker._threads import JobThreads


async def test_a_thread_is_counted_while_it_runs_and_its_return_is_told() -> None:
    started, let_go = threading.Event(), threading.Event()

    def work() -> str:
        started.set()
        let_go.wait(10)
        return "done"

    threads = JobThreads()
    returned = asyncio.Event()
    with threads.told_when_one_returns(returned.set):
        running = asyncio.create_task(asyncio.to_thread(threads.tracked(work)))
        assert await asyncio.to_thread(started.wait, 10)
        assert threads.running() == 1
        let_go.set()
        await returned.wait()
        assert threads.running() == 0
        assert await running == "done"


async def test_a_thread_whose_awaiting_task_was_cancelled_still_counts_until_it_returns() -> None:
    started, let_go = threading.Event(), threading.Event()

    def work() -> None:
        started.set()
        let_go.wait(10)

    threads = JobThreads()
    running = asyncio.create_task(asyncio.to_thread(threads.tracked(work)))
    assert await asyncio.to_thread(started.wait, 10)
    running.cancel()
    await asyncio.gather(running, return_exceptions=True)
    assert threads.running() == 1  # the thread runs on: nothing can stop it
    returned = asyncio.Event()
    with threads.told_when_one_returns(returned.set):
        let_go.set()
        await returned.wait()
    assert threads.running() == 0
