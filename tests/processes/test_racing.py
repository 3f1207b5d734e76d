"""Several worker processes at high concurrency on the same queues: each job runs exactly once,
and each process keeps to each queue's concurrency."""

from __future__ import annotations

import asyncio
import signal
from collections import defaultdict
from pathlib import Path

from starlette_jobs import Jobs, JobStatus
from tests.conftest import eventually
from tests.processes.conftest import StartWorker
from tests.processes.support import Event, count, read_run_log
from tests.processes.worker_app import other_work, work

LIMITS = {"default": 30, "other": 10}
DEFAULT_JOBS = range(2000)
OTHER_JOBS = range(2000, 3000)


def peak_concurrency(events: list[Event]) -> int:
    """The most jobs one process had between their "start" and "done" lines at once."""
    changes = sorted((e.at, 1 if e.kind == "start" else -1) for e in events)
    # At equal times the -1 sorts first: a job ending as another starts is no overlap.
    running = peak = 0
    for _, change in changes:
        running += change
        peak = max(peak, running)
    return peak


async def test_racing_worker_processes_run_each_job_exactly_once_within_their_limits(
    database_dsn: str, start_worker: StartWorker, run_log: Path
) -> None:
    async with Jobs(database_dsn, queues={}) as jobs:
        queues = [f"--queue={name}={limit}" for name, limit in LIMITS.items()]
        workers = [start_worker(*queues, dsn=database_dsn) for _ in range(3)]

        async def all_up() -> bool:
            return {worker.pid for worker in await jobs.workers()} == {w.pid for w in workers}

        # All three before the first job: on a busy machine a process that started late found
        # the others had run everything, and raced no one.
        await eventually(all_up, timeout=60, what="the three workers registered")
        await work.enqueue_many([{"n": n, "seconds": 0.002} for n in DEFAULT_JOBS])
        await other_work.enqueue_many([{"n": n, "seconds": 0.002} for n in OTHER_JOBS])

        async def all_succeeded() -> bool:
            return (await jobs.count_by_status())[JobStatus.SUCCEEDED] == 3000

        await eventually(all_succeeded, timeout=120, what="the 3,000 jobs succeeded")
        for worker in workers:
            worker.send(signal.SIGTERM)
        for worker in workers:
            assert await asyncio.to_thread(worker.wait, 60) == 0, worker.output

    events = read_run_log(run_log)
    assert count(events, "start") == count(events, "done") == dict.fromkeys(range(3000), 1)
    by_process_and_queue: dict[tuple[int, str], list[Event]] = defaultdict(list)
    for event in events:
        queue = "default" if event.n in DEFAULT_JOBS else "other"
        by_process_and_queue[event.pid, queue].append(event)
    assert {pid for pid, _ in by_process_and_queue} == {w.pid for w in workers}
    peaks = {key: peak_concurrency(group) for key, group in by_process_and_queue.items()}
    print("peak concurrency per (process, queue):", peaks)
    for (_, queue), peak in peaks.items():
        assert peak <= LIMITS[queue]
