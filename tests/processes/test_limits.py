"""Queue controls across worker processes (docs/limits.md): three workers with ten slots each on
a queue limited to four run four of its jobs at once, never more, and one job per customer on a
queue limited to one per customer; a pause stops every worker, lets the running jobs finish, and
outlasts a restart of all of them."""

from __future__ import annotations

import asyncio
import signal
from collections import Counter
from pathlib import Path

from starlette_jobs import Jobs, JobStatus, QueueLimits
from tests.processes.conftest import StartWorker
from tests.processes.support import (
    KEYED_APP,
    LIMITED_APP,
    WorkerProcess,
    count,
    eventually,
    read_run_log,
)
from tests.processes.test_racing import peak_concurrency
from tests.processes.worker_app import keyed_work, limited_work

QUEUE = "limited"
GLOBAL_LIMIT = 4  # worker_app.limited_jobs
WORKERS = 3


async def test_three_workers_of_ten_slots_run_exactly_the_global_limit_at_once(
    database_dsn: str, start_worker: StartWorker, run_log: Path
) -> None:
    async with Jobs(database_dsn, queues={}) as jobs:
        workers = await asyncio.to_thread(start_idle_workers, start_worker, database_dsn)
        # One notification for the forty jobs: the three idle workers claim at the same moment,
        # each with ten free slots. The jobs are long enough that the first four still run
        # when every worker has claimed.
        await limited_work.enqueue_many([{"n": n, "seconds": 0.4} for n in range(40)])

        async def all_done() -> bool:
            return (await jobs.count_by_status(queue=QUEUE))[JobStatus.SUCCEEDED] == 40

        await eventually(all_done, 60, "the forty jobs")
        controls = await jobs.queue_controls(QUEUE)
        for worker in workers:
            worker.send(signal.SIGTERM)
            assert await asyncio.to_thread(worker.wait, 60) == 0, worker.output

    assert controls.limits == QueueLimits(global_limit=GLOBAL_LIMIT)
    events = read_run_log(run_log)
    assert count(events, "start") == count(events, "done") == dict.fromkeys(range(40), 1)
    peak = peak_concurrency(events)  # every process's jobs, by their own start and end times
    print("peak of running jobs across the processes:", peak)
    print("jobs per process:", Counter(event.pid for event in events if event.kind == "start"))
    assert peak == GLOBAL_LIMIT


def start_idle_workers(
    start_worker: StartWorker, dsn: str, queue: str = QUEUE, app: str = LIMITED_APP
) -> list[WorkerProcess]:
    # --queue keeps the limit the Jobs declares: it sets this process's slots only.
    started = [start_worker(f"--queue={queue}=10", dsn=dsn, app=app) for _ in range(WORKERS)]
    for worker in started:
        worker.wait_for("started on queues")
    return started


async def test_a_pause_stops_every_worker_lets_running_jobs_finish_and_outlasts_a_restart(
    database_dsn: str, start_worker: StartWorker, run_log: Path
) -> None:
    async with Jobs(database_dsn, queues={}) as jobs:
        workers = await asyncio.to_thread(start_idle_workers, start_worker, database_dsn)
        await limited_work.enqueue_many([{"n": n, "seconds": 0.5} for n in range(20)])

        async def some_started() -> bool:
            return len(count(read_run_log(run_log), "start")) >= GLOBAL_LIMIT

        await eventually(some_started, 30, "the first jobs starting")
        await jobs.pause(QUEUE)

        async def none_running() -> bool:
            return (await jobs.count_by_status(queue=QUEUE))[JobStatus.RUNNING] == 0

        await eventually(none_running, 30, "the running jobs finishing")
        events = read_run_log(run_log)
        started = count(events, "start")
        assert count(events, "done") == started  # the running jobs ran to their end
        left = (await jobs.count_by_status(queue=QUEUE))[JobStatus.PENDING]
        assert left == 20 - len(started) > 0

        for worker in workers:
            worker.send(signal.SIGTERM)
            assert await asyncio.to_thread(worker.wait, 60) == 0
        workers = await asyncio.to_thread(start_idle_workers, start_worker, database_dsn)
        # Nothing announces a claim that does not happen: three workers, each polling every
        # 0.2 s, have had seven polls each to break the pause.
        await asyncio.sleep(1.5)
        counts = await jobs.count_by_status(queue=QUEUE)
        assert (counts[JobStatus.PENDING], counts[JobStatus.RUNNING]) == (left, 0)
        assert (await jobs.queue_controls(QUEUE)).paused

        await jobs.resume(QUEUE)

        async def all_done() -> bool:
            return (await jobs.count_by_status(queue=QUEUE))[JobStatus.SUCCEEDED] == 20

        await eventually(all_done, 60, "the resumed queue draining")
    assert count(read_run_log(run_log), "start") == dict.fromkeys(range(20), 1)


async def test_three_workers_run_one_job_per_customer_at_once(
    database_dsn: str, start_worker: StartWorker, run_log: Path
) -> None:
    customers = {n: "abc"[n % 3] for n in range(15)}
    async with Jobs(database_dsn, queues={}) as jobs:
        workers = await asyncio.to_thread(
            start_idle_workers, start_worker, database_dsn, "keyed", KEYED_APP
        )
        await keyed_work.enqueue_many(
            [{"n": n, "customer": customer, "seconds": 0.3} for n, customer in customers.items()]
        )

        async def all_done() -> bool:
            return (await jobs.count_by_status(queue="keyed"))[JobStatus.SUCCEEDED] == 15

        await eventually(all_done, 60, "the fifteen jobs")
        for worker in workers:
            worker.send(signal.SIGTERM)
            assert await asyncio.to_thread(worker.wait, 60) == 0, worker.output

    events = read_run_log(run_log)
    assert count(events, "start") == dict.fromkeys(range(15), 1)
    peaks = {
        customer: peak_concurrency([e for e in events if customers[e.n] == customer])
        for customer in "abc"
    }
    assert peaks == {"a": 1, "b": 1, "c": 1}
    assert peak_concurrency(events) == 3  # three customers at once: the limit is per customer
