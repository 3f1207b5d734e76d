"""Deploy-aware claiming (docs/workers.md, "Rolling deploys") on both stores: a claim takes only
the job names it is given, a drain does not wait for the others, the jobs no registered worker
can run are listed, and a worker fails them once none could for `unknown_job_grace`. Old and new
worker processes side by side: processes/test_rolling_deploy.py."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from starlette_jobs import EventKind, Jobs, JobStatus, UnrunnableJobs, job
from starlette_jobs._attempt_records import Unfinished
from starlette_jobs._queue import QueueLimits
from starlette_jobs._worker_records import NewWorker
from starlette_jobs.store._protocol import Store
from starlette_jobs.worker._strays import Strays
from tests.conftest import eventually
from tests.records import new_jobs

QUEUE = "deploy-contract"


@job(name="deploy.contract.known", queue=QUEUE)
async def known() -> str:
    return "ran"


def a_worker(queues: tuple[str, ...], job_names: tuple[str, ...]) -> NewWorker:
    return NewWorker("w:1:a", "web-1", 1, queues, job_names, "1.0", 10.0)


async def names_of(store: Store, queue: str, status: JobStatus) -> list[str]:
    return sorted(r.name for r in await store.list_jobs(status, None, 100) if r.queue == queue)


# -- the store -----------------------------------------------------------------------------------


async def test_a_claim_with_names_takes_only_jobs_of_those_names(store: Store) -> None:
    await store.insert_jobs(new_jobs(2, name="old.job"))
    await store.insert_jobs(new_jobs(2, name="new.job"))
    claims = await store.claim_batch("default", 10, "old-worker", 30.0, ["old.job", "other"])
    assert sorted(claim.name for claim in claims) == ["old.job", "old.job"]
    assert await names_of(store, "default", JobStatus.PENDING) == ["new.job", "new.job"]
    # No names: any job, as before deploy-aware claiming.
    assert [c.name for c in await store.claim_batch("default", 10, "w", 30.0)] == ["new.job"] * 2


async def test_a_limited_claim_with_names_takes_only_jobs_of_those_names(store: Store) -> None:
    await store.declare_queues({"limited": QueueLimits(global_limit=10)})
    await store.insert_jobs(new_jobs(3, name="new.job", queue="limited"))
    await store.insert_jobs(new_jobs(1, name="old.job", queue="limited", priority=-1))
    claims = await store.claim_limited_batch("limited", 10, "w", 30.0, (), ["old.job"])
    assert [claim.name for claim in claims] == ["old.job"]
    assert await names_of(store, "limited", JobStatus.PENDING) == ["new.job"] * 3


async def test_a_drain_count_keeps_jobs_of_unknown_names_apart(store: Store) -> None:
    await store.insert_jobs(new_jobs(1, name="old.job"))
    await store.insert_jobs(new_jobs(2, name="new.job"))
    [claim] = await store.claim_batch("default", 1, "w", 30.0, ["new.job"])
    # Running: waited for whatever its name (another worker runs it).
    assert await store.count_unfinished(["default"], 0, 0, ["old.job"]) == Unfinished(
        2, 0, 0, unknown=1
    )
    assert await store.count_unfinished(["default"], 0, 0) == Unfinished(3, 0, 0, unknown=0)
    assert claim.name == "new.job"


async def test_unrunnable_jobs_are_those_no_registered_worker_can_run(store: Store) -> None:
    await store.register_worker(a_worker(("default", "mail"), ("mail.send", "reports.build")))
    await store.insert_jobs(new_jobs(1, name="mail.send"))  # runnable
    await store.insert_jobs(new_jobs(1, name="gone.job"))  # no worker declares it
    await store.insert_jobs(new_jobs(1, name="gone.job", delay=3600))  # and later
    await store.insert_jobs(new_jobs(2, name="mail.send", queue="archive"))  # nobody works it
    everything = await store.unrunnable_jobs()
    assert all(isinstance(found, UnrunnableJobs) for found in everything)
    assert [(f.queue, f.name, f.pending) for f in everything] == [
        ("archive", "mail.send", 2),
        ("default", "gone.job", 2),
    ]
    # What a worker of `default` looks at: the due jobs at the head of its queue.
    [due] = await store.unrunnable_jobs(["default"], 10)
    assert (due.queue, due.name, due.pending) == ("default", "gone.job", 1)
    # A running or finished job is nobody's worry here.
    [claim] = await store.claim_batch("default", 10, "w", 30.0, ["gone.job"])
    assert await store.unrunnable_jobs(["default"], 10) == []
    assert claim.name == "gone.job"


async def test_with_no_worker_every_pending_job_is_unrunnable(store: Store) -> None:
    await store.insert_jobs(new_jobs(3, name="any.job"))
    [found] = await store.unrunnable_jobs()
    assert (found.queue, found.name, found.pending) == ("default", "any.job", 3)


# -- through Jobs --------------------------------------------------------------------------------


@pytest.fixture
def dsn(postgres_dsn: str | None) -> str:
    return postgres_dsn or f"memory://deploy-{uuid.uuid4().hex}"


async def insert_unknown(jobs: Jobs) -> int:
    """A job of a name this process does not declare, as newer code would enqueue it."""
    [job_id] = await jobs._ready_store.insert_jobs(
        new_jobs(name="deploy.contract.only_in_new_code", queue=QUEUE)
    )
    return job_id


async def test_a_worker_leaves_a_job_it_does_not_declare_for_one_that_does(dsn: str) -> None:
    async with Jobs(dsn, queues={QUEUE: 4}) as jobs:
        unknown = await insert_unknown(jobs)
        ran = await known.enqueue()
        await jobs.drain(timeout=10)  # returns: it does not wait for that job
        [unrunnable] = await jobs.unrunnable_jobs()
        waiting = await jobs.get(unknown)
        assert (await jobs.result(known, ran)) == "ran"
    assert (unrunnable.queue, unrunnable.name) == (QUEUE, "deploy.contract.only_in_new_code")
    assert waiting is not None
    assert (waiting.status, waiting.attempts, waiting.errors) == (JobStatus.PENDING, 0, [])


async def test_a_job_no_worker_declares_fails_once_the_grace_has_passed(dsn: str) -> None:
    async with Jobs(dsn, queues={QUEUE: 4}, unknown_job_grace=0.2, poll_interval=0.1) as jobs:
        unknown = await insert_unknown(jobs)
        failed = await jobs.wait(unknown, timeout=20)
        assert await jobs.unrunnable_jobs() == []
    assert (failed.status, failed.attempts) == (JobStatus.FAILED, 1)
    assert failed.last_error is not None
    assert "no job named 'deploy.contract.only_in_new_code' is registered" in failed.last_error


async def test_a_stray_claimed_after_a_worker_declaring_it_started_is_given_to_it(
    dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A name this worker fails as a stray (no live worker declared it for the grace), and then
    the first new worker of a rolling deploy starts, declaring it: until this worker looked
    again (a third of a lease later, 20 s by default), it claimed and failed the new worker's
    jobs. It gives such a job back now, with no attempt counted, and claims that name no more."""
    async with Jobs(dsn, queues={QUEUE: 4}, unknown_job_grace=0.2, poll_interval=0.1) as jobs:
        first = await insert_unknown(jobs)
        assert (await jobs.wait(first, timeout=20)).status is JobStatus.FAILED  # a stray now
        monkeypatch.setattr(Strays, "look", _no_look)  # it does not look again meanwhile
        new_worker = NewWorker(
            "new:2:b", "web-2", 2, (QUEUE,), ("deploy.contract.only_in_new_code",), "1.1", 3600.0
        )
        await jobs._ready_store.register_worker(new_worker)
        second = await insert_unknown(jobs)

        async def given_back() -> bool:
            return EventKind.RELEASED in [event.kind for event in await jobs.events(second)]

        await eventually(given_back, "the job to be given back")
        record = await jobs.get(second)
        await jobs.drain(timeout=10)  # it claims that name no more
        after = await jobs.get(second)
    assert record is not None
    assert (record.status, record.attempts, record.errors) == (JobStatus.PENDING, 0, [])
    assert after is not None
    assert after.status is JobStatus.PENDING


async def _no_look(self: Strays) -> None:
    pass


async def test_a_stray_whose_check_fails_unexpectedly_fails_as_before_not_stuck_running(
    dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The look at the registry before failing a stray raised something other than an outage
    (a permission error, say): the attempt left before its bookkeeping, and the job stayed
    `running`, its lease renewed, a slot taken, until the worker restarted."""

    async def broken(self: Strays, queue: str, name: str) -> bool:
        raise RuntimeError("the registry could not be read (test)")

    monkeypatch.setattr(Strays, "declared_elsewhere", broken)
    async with Jobs(dsn, queues={QUEUE: 4}, unknown_job_grace=0.2, poll_interval=0.1) as jobs:
        stray = await insert_unknown(jobs)
        failed = await jobs.wait(stray, timeout=20)
    assert (failed.status, failed.attempts) == (JobStatus.FAILED, 1)


async def test_a_stray_stopped_during_its_check_leaves_no_attempt_behind(
    dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker stops its attempts (its liveness lock was lost) while a stray's look at the
    registry is in flight: the attempt never ran, and must not stay counted as running (a slot
    lost for good, its lease renewed for a task that is gone)."""
    checking = asyncio.Event()

    async def hangs(self: Strays, queue: str, name: str) -> bool:
        checking.set()
        await asyncio.Event().wait()
        return False

    monkeypatch.setattr(Strays, "declared_elsewhere", hangs)
    async with Jobs(dsn, queues={QUEUE: 4}, unknown_job_grace=0.2, poll_interval=0.1) as jobs:
        await insert_unknown(jobs)
        await asyncio.wait_for(checking.wait(), timeout=20)
        worker = jobs._worker
        assert worker is not None
        assert worker.running_count() == 1
        worker._stops.stop_all_but_threads(worker.worker_id)

        async def none_running() -> bool:
            return worker.running_count() == 0

        await eventually(none_running, "the stopped attempt to be forgotten")
