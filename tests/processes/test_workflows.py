"""Three worker processes finishing the 1,000 steps of one fan-in at the same time, 20 times:
the step that waits for them all is released once, runs once, and only after every one of them
(the release is counted on its row by each outcome's statement: docs/workflows.md). A worker
SIGKILLed in the middle of a 200-step workflow: the workflow completes, each step succeeded
once, and only the steps whose outcome it had not written ran again."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

from starlette_jobs import Jobs, JobStatus, Step, Workflow
from tests.processes.conftest import StartWorker
from tests.processes.support import count, read_run_log, wait_until
from tests.processes.worker_app import work

STEPS = 1000
ROUNDS = 20


async def test_three_processes_release_a_fan_in_of_1000_steps_exactly_once(
    database_dsn: str, start_worker: StartWorker, run_log: Path
) -> None:
    workers = [start_worker("--queue=default=50", dsn=database_dsn) for _ in range(3)]
    for worker in workers:
        await asyncio.to_thread(worker.wait_for, "started on queues")
    async with Jobs(database_dsn, queues={}) as jobs:
        for round_ in range(ROUNDS):
            # Each round's jobs log numbers of their own: round * 10,000 + step, and + 9,999 for
            # the collecting step.
            first, collect = round_ * 10_000, round_ * 10_000 + 9_999
            flow = Workflow(f"fan-in {round_}")
            steps = flow.add_many("step", work, [{"n": first + n} for n in range(STEPS)])
            flow.after(*steps).add("collect", work, n=collect)
            enqueued = await flow.enqueue(jobs=jobs)
            await jobs.wait(enqueued.steps["collect"], timeout=60)
            events = [e for e in read_run_log(run_log) if first <= e.n <= collect]
            expected = dict.fromkeys([*range(first, first + STEPS), collect], 1)
            assert count(events, "start") == count(events, "done") == expected
            collected = next(e for e in events if e.n == collect and e.kind == "start")
            assert all(e.at <= collected.at for e in events if e.kind == "done" and e.n != collect)
            ran_by = {e.pid for e in events if e.kind == "start"}
            assert len(ran_by) >= 2, "the steps are shared by the processes"
            record = await jobs.workflow(enqueued.id)
            assert record is not None
            assert set(record.statuses.values()) == {JobStatus.SUCCEEDED}
            ready = [e for e in await jobs.events(enqueued.steps["collect"]) if e.kind == "ready"]
            assert len(ready) == 1
    for worker in workers:
        worker.send(signal.SIGTERM)
    for worker in workers:
        assert await asyncio.to_thread(worker.wait, 30) == 0, worker.output


async def test_a_worker_killed_mid_workflow_leaves_it_to_complete(
    database_dsn: str, start_worker: StartWorker, run_log: Path
) -> None:
    lease = ("--queue", "default=20", "--lease-duration", "2")
    async with Jobs(database_dsn, queues={}) as jobs:
        # Four layers of 50 steps, each step of a layer waiting for the whole layer before it.
        flow = Workflow("layers")
        layer: list[Step[int]] = []
        for depth in range(4):
            adding = flow.after(*layer) if layer else flow
            layer = [
                adding.add(f"l{depth}[{n}]", work, n=depth * 50 + n, seconds=0.2) for n in range(50)
            ]
        enqueued = await flow.enqueue(jobs=jobs)
        first = start_worker(*lease, dsn=database_dsn)

        def into_the_second_layer_with_steps_running() -> bool:
            # Steps of 0.2 s, twenty at a time: a layer runs for 0.6 s, and the gap between two
            # layers (one outcome statement and a claim) lasts milliseconds. The kill is sent
            # while steps run, not in that gap.
            events = read_run_log(run_log)
            done = sum(count(events, "done").values())
            return done >= 70 and sum(count(events, "start").values()) - done >= 10

        await asyncio.to_thread(
            wait_until, into_the_second_layer_with_steps_running,
            what="the first worker to be into the second layer, steps running",
        )  # fmt: skip
        first.send(signal.SIGKILL)
        assert await asyncio.to_thread(first.wait) == -signal.SIGKILL
        started_before_kill = count(read_run_log(run_log), "start")
        at_the_kill = await jobs.workflow(enqueued.id)
        assert at_the_kill is not None
        # A step whose outcome the dead worker had not written runs again, even if it had
        # finished: its result was never recorded (at least once, docs/workers.md).
        written = {
            depth * 50 + n
            for depth in range(4)
            for n in range(50)
            if at_the_kill.statuses[f"l{depth}[{n}]"] is JobStatus.SUCCEEDED
        }
        second = start_worker(*lease, "--burst", dsn=database_dsn)
        assert await asyncio.to_thread(second.wait, 120) == 0, second.output
        record = await jobs.workflow(enqueued.id)
    assert record is not None
    assert set(record.statuses.values()) == {JobStatus.SUCCEEDED}
    events = read_run_log(run_log)
    assert set(count(events, "done")) == set(range(200))
    starts = count(events, "start")
    ran_twice = {n for n, times in starts.items() if times > 1}
    in_flight = {n for n in started_before_kill if n not in written}
    assert in_flight, "the kill should land while steps run"
    print(f"{len(in_flight)} step(s) in flight at the kill, {len(ran_twice)} ran twice")
    # Only what the dead worker had started and not written ran again, once more; no step
    # written ran again.
    assert ran_twice <= in_flight
    assert all(times <= 2 for times in starts.values())
    assert all(count(events, "done")[n] == 1 for n in written)
