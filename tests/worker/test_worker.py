"""The worker (`_worker`) driven directly on the in-memory store: how many jobs a claim asks
for, concurrency per queue, drain, and what shutdown does with running jobs and how long it
may take. On PostgreSQL, under faults: integration/test_shutdown.py, test_concurrency.py,
test_lost_claims.py and processes/."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import threading
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any
from uuid import UUID

import pytest

from starlette_jobs import DatabaseUnavailableError, Jobs, JobStatus, Retry, current_job, job
from starlette_jobs._attempt_records import Claim
from starlette_jobs._tracing import Tracing
from starlette_jobs.memory._store import MemoryStore
from starlette_jobs.postgres._store import PostgresStore
from starlette_jobs.worker._settings import WorkerSettings
from starlette_jobs.worker._shutdown import release_held
from starlette_jobs.worker._worker import Worker
from tests.conftest import eventually
from tests.records import new_jobs

QUEUE = "worker-tests"


class Gate:
    """Jobs wait here until the test opens it; `started` counts those that got in."""

    def __init__(self) -> None:
        self.open = asyncio.Event()
        self.started = 0


gates: list[Gate] = []


@job(queue=QUEUE)
async def wait_at_gate(n: int) -> int:
    gate = gates[-1]
    gate.started += 1
    await gate.open.wait()
    return n


@pytest.fixture
def gate() -> Gate:
    gates.append(Gate())
    return gates[-1]


class RecordingStore(MemoryStore):
    """The in-memory store, noting the `limit` of each claim; `fail_claims` claims fail."""

    def __init__(self, fail_claims: int = 0) -> None:
        super().__init__()
        self.limits: list[int] = []
        self.fail_claims = fail_claims
        self.reconciled: list[str] = []

    async def claim_batch(
        self,
        queue: str,
        limit: int,
        worker_id: str,
        lease_seconds: float,
        names: Sequence[str] | None = None,
    ) -> list[Claim]:
        if self.fail_claims:
            self.fail_claims -= 1
            raise DatabaseUnavailableError("connection reset by peer")
        self.limits.append(limit)
        return await super().claim_batch(queue, limit, worker_id, lease_seconds, names)

    async def release_unknown_claims(self, queue: str, worker_id: str, known: Any) -> list[int]:
        self.reconciled.append(queue)
        return await super().release_unknown_claims(queue, worker_id, known)


def settings(**changes: Any) -> WorkerSettings:
    values: dict[str, Any] = {
        "queues": {QUEUE: 3},
        "batch_size": 100,
        "poll_interval": 0.05,
        "lease_duration": 30.0,
        "shutdown_grace": 5.0,
        "retention": None,
    }
    return WorkerSettings(**{**values, **changes})


@asynccontextmanager
async def running(store: MemoryStore, **changes: Any) -> AsyncIterator[Worker]:
    worker = Worker(store, settings(**changes), Tracing())
    await worker.start()
    try:
        yield worker
    finally:
        await worker.stop()


async def enqueue(store: MemoryStore, count: int, **options: Any) -> list[int]:
    return await store.insert_jobs(
        new_jobs(count, name=wait_at_gate.name, queue=QUEUE, payload='{"n": 1}', **options)
    )


def at_least(count: int, gate: Gate) -> Callable[[], Any]:
    async def check() -> bool:
        return gate.started >= count

    return check


async def statuses(store: MemoryStore) -> list[JobStatus]:
    return sorted(r.status for r in await store.list_jobs(None, QUEUE, 100))


async def test_a_claim_asks_for_no_more_than_the_free_slots_and_the_batch_size(
    gate: Gate,
) -> None:
    store = RecordingStore()
    await enqueue(store, 10)
    async with running(store, queues={QUEUE: 3}, batch_size=2) as worker:
        await eventually(at_least(3, gate), "three jobs running")
        assert store.limits[:2] == [2, 1]  # the batch size, then the one slot left
        assert max(store.limits) <= 2
        assert worker.running_count() == 3
        assert await statuses(store) == [JobStatus.PENDING] * 7 + [JobStatus.RUNNING] * 3
        gate.open.set()
        await worker.drain(10, include_scheduled=True)
    assert await statuses(store) == [JobStatus.SUCCEEDED] * 10
    assert gate.started == 10


async def test_an_idle_worker_finds_jobs_no_notification_announced_at_each_poll(
    gate: Gate,
) -> None:
    # Written by other means, without a NOTIFY: only the poll finds them. Notified jobs in
    # between start waits at other times than the poll's timer was armed for.
    store = RecordingStore()
    gate.open.set()
    unannounced = dataclasses.replace(
        new_jobs(name=wait_at_gate.name, queue=QUEUE, payload='{"n": 1}'), notify=False
    )
    async with running(store, poll_interval=0.05):
        for round in range(3):
            await store.insert_jobs(unannounced)
            await eventually(at_least(2 * round + 1, gate), f"poll {round + 1} to find its job")
            await enqueue(store, 1)
            await eventually(at_least(2 * round + 2, gate), f"notified job {round + 1} to run")
    assert await statuses(store) == [JobStatus.SUCCEEDED] * 6


@job(queue=QUEUE)
async def quick(n: int) -> None:
    await asyncio.sleep(0)


class RoundTripStore(RecordingStore):
    """Claims take a round trip, as over a network: jobs running meanwhile end during it."""

    async def claim_batch(
        self,
        queue: str,
        limit: int,
        worker_id: str,
        lease_seconds: float,
        names: Sequence[str] | None = None,
    ) -> list[Claim]:
        await asyncio.sleep(0.002)
        return await super().claim_batch(queue, limit, worker_id, lease_seconds, names)


async def test_a_worker_protecting_its_loop_claims_quick_jobs_in_growing_batches() -> None:
    # Quick jobs end during the next claim's round trip: one job per claim would be all the
    # limit let through if it grew only while it saw jobs running.
    store = RoundTripStore()
    await store.insert_jobs(new_jobs(2000, name=quick.name, queue=QUEUE, payload='{"n": 1}'))
    async with running(store, queues={QUEUE: 10}, loop_lag_target=0.005) as worker:
        await worker.drain(60, include_scheduled=True)
    assert (await store.count_unfinished([QUEUE], None, None)).waited == 0
    assert store.limits[0] == 1  # a protected queue starts at one job
    # Each claim asks for what the limit leaves; a limit stuck at one or two running jobs
    # (one claimed, one ending during the round trip) is what this guards against.
    assert max(store.limits) > 2


async def test_drain_leaves_scheduled_jobs_unless_asked_to_wait_for_them(gate: Gate) -> None:
    store = MemoryStore()
    gate.open.set()
    await enqueue(store, 1)
    await enqueue(store, 1, delay=1.5)
    await enqueue(store, 1, delay=3600)
    async with running(store) as worker:
        await worker.drain(10, include_scheduled=False)
        assert await statuses(store) == [JobStatus.PENDING] * 2 + [JobStatus.SUCCEEDED]
        # Waits for the job due within its timeout, not for the one an hour away.
        await worker.drain(10, include_scheduled=True)
        assert await statuses(store) == [JobStatus.PENDING] + [JobStatus.SUCCEEDED] * 2


async def test_drain_gives_up_after_its_timeout_while_a_job_runs(gate: Gate) -> None:
    store = MemoryStore()
    await enqueue(store, 1)
    async with running(store) as worker:
        await eventually(at_least(1, gate), "the job running")
        with pytest.raises(TimeoutError):
            await worker.drain(0.2, include_scheduled=False)
        gate.open.set()


async def test_jobs_that_outlast_the_grace_are_given_back_with_their_attempt(gate: Gate) -> None:
    store = MemoryStore()
    ids = await enqueue(store, 2)
    async with running(store, shutdown_grace=0.0) as worker:
        await eventually(at_least(2, gate), "both jobs running")
    assert worker.abandoned == 0  # they unwound when cancelled
    for job_id in ids:
        record = await store.get_job(job_id)
        assert record is not None
        assert (record.status, record.attempts) == (JobStatus.PENDING, 0)


async def test_jobs_that_finish_within_the_grace_succeed(gate: Gate) -> None:
    store = MemoryStore()
    await enqueue(store, 2)
    async with running(store) as worker:
        await eventually(at_least(2, gate), "both jobs running")
        stopping = asyncio.create_task(worker.stop())
        await asyncio.sleep(0)  # the stop has begun: nothing more is claimed
        await enqueue(store, 1)
        gate.open.set()
        await stopping
    assert await statuses(store) == [JobStatus.PENDING] + [JobStatus.SUCCEEDED] * 2


async def test_a_failing_claim_is_retried_after_giving_back_what_it_may_have_taken(
    gate: Gate, caplog: pytest.LogCaptureFixture
) -> None:
    store = RecordingStore(fail_claims=2)
    gate.open.set()
    await enqueue(store, 3)
    async with running(store) as worker:
        await worker.drain(10, include_scheduled=False)
    assert await statuses(store) == [JobStatus.SUCCEEDED] * 3
    assert QUEUE in store.reconciled
    assert f"claiming from queue {QUEUE!r} failed, retrying: connection reset by peer" in (
        caplog.messages
    )


async def test_waking_a_queue_the_worker_does_not_run_is_ignored() -> None:
    store = MemoryStore()
    async with running(store) as worker:
        worker.wake("not-mine")
        assert worker.queue_names == [QUEUE]
        assert worker.running_count() == 0


# -- cancel on request, and progress --------------------------------------------------------


@job(queue=QUEUE)
async def count_until_cancelled(n: int) -> dict[str, int]:
    gate = gates[-1]
    gate.started += 1
    counted = 0
    try:
        while True:
            counted += 1
            current = current_job()
            assert current is not None
            current.report_progress({"counted": counted})
            await asyncio.sleep(0.001)
    except asyncio.CancelledError:
        return {"counted": counted}


@job(queue=QUEUE)
def count_in_thread_until_cancelled(n: int) -> dict[str, int]:
    gate = gates[-1]
    gate.started += 1
    current = current_job()
    assert current is not None
    counted = 0
    while not current.cancel_requested:
        counted += 1
    return {"counted": counted}


class DeafStore(MemoryStore):
    """Its listener never passes cancel requests on: only the heartbeat tells the worker."""

    async def listen(
        self,
        queues: Any,
        on_notify: Callable[[str], None],
        on_cancel: Callable[[UUID], None] | None = None,
        on_controls: Callable[[str], None] | None = None,
    ) -> Any:
        return await super().listen(queues, on_notify, None, on_controls)


async def run_and_cancel(store: MemoryStore, gate: Gate, name: str, **changes: Any) -> int:
    [job_id] = await store.insert_jobs(new_jobs(1, name=name, queue=QUEUE, payload='{"n": 1}'))
    async with running(store, **changes) as worker:
        await eventually(at_least(1, gate), "the job running")
        assert await store.cancel_job(job_id) is JobStatus.RUNNING
        await worker.drain(10, include_scheduled=True)
    return job_id


@pytest.mark.parametrize("name", [count_until_cancelled.name, count_in_thread_until_cancelled.name])
async def test_a_job_cancelled_on_request_ends_cancelled_with_what_it_returned(
    name: str, gate: Gate
) -> None:
    store = MemoryStore()
    job_id = await run_and_cancel(store, gate, name)
    record = await store.get_job(job_id)
    assert record is not None
    assert (record.status, record.attempts, gate.started) == (JobStatus.CANCELLED, 1, 1)
    assert set(record.result) == {"counted"}
    assert record.result["counted"] > 0
    assert record.errors == []


async def test_the_last_progress_is_kept_with_the_outcome(gate: Gate) -> None:
    store = MemoryStore()
    job_id = await run_and_cancel(store, gate, count_until_cancelled.name)
    record = await store.get_job(job_id)
    assert record is not None
    assert record.progress == record.result  # the last count reported is the one returned


async def test_a_cancel_request_missed_by_the_listener_arrives_with_the_heartbeat(
    gate: Gate,
) -> None:
    store = DeafStore()
    job_id = await run_and_cancel(store, gate, count_until_cancelled.name, lease_duration=0.3)
    record = await store.get_job(job_id)
    assert record is not None
    assert (record.status, record.attempts) == (JobStatus.CANCELLED, 1)


async def test_a_request_for_another_workers_attempt_changes_nothing_here(gate: Gate) -> None:
    store = MemoryStore()
    await enqueue(store, 1)
    [other] = await store.insert_jobs(new_jobs(1, queue="elsewhere"))
    async with running(store) as worker:
        await eventually(at_least(1, gate), "the job running")
        await store.claim_batch("elsewhere", 1, "another-worker", 30)
        assert await store.cancel_job(other) is JobStatus.RUNNING
        gate.open.set()
        await worker.drain(10, include_scheduled=True)
    assert await statuses(store) == [JobStatus.SUCCEEDED]


# -- stops that arrive as a job is claimed (both stores) --------------------------------------


StopKind = str
"""How an attempt is stopped: "cancel" (`jobs.cancel`), "lost" (its lease went to another
worker), "shutdown" (the worker gave up on it)."""


class StopsAtClaim:
    """A store that stops the first attempt it hands out as the claim's answer comes back: with
    `before_registered`, the cancel request's notification is received and handed to the worker
    before the worker has seen the claim; otherwise the stop is handed to the worker just after
    the claim's answer (the attempt registered), before the attempt's task first runs."""

    kind: StopKind = "cancel"
    before_registered = False
    worker: Worker | None = None
    stopped = False
    delivered = False
    shutdowns: list[asyncio.Task[None]]
    _on_cancel: Callable[[UUID], None] | None = None
    _received: asyncio.Queue[UUID]

    async def listen(
        self,
        queues: Any,
        on_notify: Callable[[str], None],
        on_cancel: Callable[[UUID], None] | None = None,
        on_controls: Callable[[str], None] | None = None,
    ) -> Any:
        self._on_cancel, self._received = on_cancel, asyncio.Queue()
        self.shutdowns = []
        return await super().listen(  # type: ignore[misc]
            queues, on_notify, self._received.put_nowait, on_controls
        )

    async def claim_batch(
        self,
        queue: str,
        limit: int,
        worker_id: str,
        lease_seconds: float,
        names: Sequence[str] | None = None,
    ) -> list[Claim]:
        claims: list[Claim] = await super().claim_batch(  # type: ignore[misc]
            queue, limit, worker_id, lease_seconds, names
        )
        if self.stopped or not claims:
            return claims
        self.stopped = True
        assert self.worker is not None
        assert self._on_cancel is not None
        [claim] = claims
        token, loop = claim.lease_token, asyncio.get_running_loop()
        if self.kind == "cancel":
            await self.cancel_job(claim.id)  # type: ignore[attr-defined]
            async with asyncio.timeout(10):
                assert await self._received.get() == token  # the NOTIFY has arrived
            if self.before_registered:
                self._deliver(self._on_cancel, token)
            else:
                loop.call_soon(self._deliver, self._on_cancel, token)
        elif self.kind == "lost":
            # Rescued meanwhile and taken by another worker; the heartbeat finds it gone.
            await self.release_jobs([(claim.id, token)])  # type: ignore[attr-defined]
            assert await super().claim_batch(queue, 1, "another-worker", 30)  # type: ignore[misc]
            loop.call_soon(self._deliver, self.worker._stops.lost, claim.id, token)
        else:
            loop.call_soon(self._deliver, self._shut_down, token)
        return claims

    def _deliver(self, stop: Callable[..., None], *args: Any) -> None:
        stop(*args)
        self.delivered = True

    def _shut_down(self, token: UUID) -> None:
        """What `give_running_jobs_the_grace` and `Worker.stop` do with an attempt still running
        past the grace period: cancel it, then give its job back once it ended cancelled."""
        worker = self.worker
        assert worker is not None
        found = worker._running.get(token)
        assert found is not None
        assert not found[0].done()
        task, claim = found
        worker._stops.cancel(token, task)

        async def give_back() -> None:
            await asyncio.wait([task])
            if task.cancelled():
                await release_held(worker._store, [(claim.id, token)])

        self.shutdowns.append(asyncio.create_task(give_back()))


class MemoryStopsAtClaim(StopsAtClaim, MemoryStore):
    pass


class PostgresStopsAtClaim(StopsAtClaim, PostgresStore):
    pass


@pytest.fixture
async def stopping_store(jobs_dsn: str) -> AsyncIterator[StopsAtClaim]:
    opened: StopsAtClaim
    if jobs_dsn.startswith("memory://"):
        opened = MemoryStopsAtClaim()
    else:
        opened = await PostgresStopsAtClaim.open(jobs_dsn, min_size=1, max_size=4)
    yield opened
    await opened.close()


ran: list[int] = []


@job(queue=QUEUE)
async def noted(n: int) -> int:
    ran.append(n)
    return n


@pytest.mark.parametrize(
    ("kind", "before_registered", "ends"),
    [
        ("cancel", False, JobStatus.CANCELLED),
        ("cancel", True, JobStatus.CANCELLED),
        ("lost", False, JobStatus.RUNNING),  # on the other worker
        ("shutdown", False, JobStatus.SUCCEEDED),  # given back, then claimed and run again
    ],
)
async def test_a_stop_that_comes_as_the_job_is_claimed_leaves_nothing_running(
    stopping_store: StopsAtClaim, kind: str, before_registered: bool, ends: JobStatus
) -> None:
    ran.clear()
    store: Any = stopping_store
    store.kind, store.before_registered = kind, before_registered
    new = new_jobs(1, name=noted.name, queue=QUEUE, payload='{"n": 7}')
    [job_id] = await store.insert_jobs(new)
    worker = Worker(store, settings(queues={QUEUE: 1}, lease_duration=30.0), Tracing())
    store.worker = worker
    await worker.start()
    try:
        # The stopped attempt ends without running, and its slot is free again. On the old
        # code its task never started, so it stayed `running` here for ever.
        await eventually(
            lambda: _settled(worker, store, job_id, ends), f"the job {ends.value}", timeout=10
        )
        assert worker._held() == []  # no lease kept alive for the stopped attempt
        await asyncio.gather(*store.shutdowns)
    finally:
        await worker.stop()
    record = await store.get_job(job_id)
    events = [event.kind.value for event in await store.job_events(job_id)]
    if kind == "cancel":
        assert ran == []
        assert (record.status, record.attempts) == (JobStatus.CANCELLED, 1)
        assert events == ["enqueued", "claimed", "cancel_requested", "cancelled"]
    elif kind == "lost":
        assert ran == []
        assert record.status is JobStatus.RUNNING
        assert events == ["enqueued", "claimed", "released", "claimed"]
    else:  # run once, after it was given back with its attempt
        assert ran == [7]
        assert (record.status, record.attempts) == (JobStatus.SUCCEEDED, 1)
        assert events == ["enqueued", "claimed", "released", "claimed", "succeeded"]


async def _settled(worker: Worker, store: Any, job_id: int, status: JobStatus) -> bool:
    record = await store.get_job(job_id)
    return store.delivered and worker.running_count() == 0 and record.status is status


# -- a sync job is told whatever stops its attempt (both stores) ------------------------------


class Spin:
    """What the spinning job saw: it started, then the stop flag."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.told_to_stop = threading.Event()


spins: list[Spin] = []


def spin_until_told() -> str:
    me, spin = current_job(), spins[-1]
    assert me is not None
    spin.started.set()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if me.cancel_requested:
            spin.told_to_stop.set()
            return "stopped"
        time.sleep(0.002)
    return "ran its 30 s"


@job(queue=QUEUE, retry=Retry.none())
def spins_on(n: int) -> str:
    return spin_until_told()


@job(queue=QUEUE, retry=Retry.none(), timeout=0.2)
def spins_past_its_timeout(n: int) -> str:
    return spin_until_told()


async def in_thread(event: threading.Event) -> bool:
    """Waits up to 10 s for a thread's `event`, off the event loop."""
    return await asyncio.get_running_loop().run_in_executor(None, event.wait, 10)


@pytest.fixture
async def plain_store(jobs_dsn: str) -> AsyncIterator[Any]:
    opened: Any = (
        MemoryStore()
        if jobs_dsn.startswith("memory://")
        else await PostgresStore.open(jobs_dsn, min_size=1, max_size=4)
    )
    yield opened
    await opened.close()


@pytest.mark.parametrize("stop", ["timeout", "lost lease", "shutdown"])
async def test_a_sync_job_is_told_when_the_worker_gives_its_attempt_up(
    plain_store: Any, stop: str
) -> None:
    spins.append(Spin())
    name = spins_past_its_timeout.name if stop == "timeout" else spins_on.name
    [job_id] = await plain_store.insert_jobs(
        new_jobs(1, name=name, queue=QUEUE, payload='{"n": 1}', max_attempts=1)
    )
    worker = Worker(plain_store, settings(lease_duration=0.6, shutdown_grace=0.0), Tracing())
    await worker.start()
    try:
        assert await in_thread(spins[-1].started)
        if stop == "lost lease":
            [held] = worker._held()
            await plain_store.release_jobs([held])  # e.g. an operator's release
        elif stop == "shutdown":
            await worker.stop()
            # Its thread returned within the unwind time: not counted as left behind (it was,
            # for being a sync job's, and the CLI worker then exited without its interpreter's
            # own shutdown, saying the job ignored cancellation).
            assert worker.abandoned == 0
        # On the old code only `jobs.cancel` set the flag: the thread ran its whole 30 s.
        assert await in_thread(spins[-1].told_to_stop)
    finally:
        await worker.stop()
    record = await plain_store.get_job(job_id)
    if stop == "timeout":
        assert record.status is JobStatus.FAILED
        assert record.last_error.endswith("TimeoutError: job timed out after 0.2 s")
    else:  # given back (or taken from it): pending again, its attempt not used up
        assert (record.status, record.attempts) == (JobStatus.PENDING, 0)


held_threads: list[threading.Event] = []


@job(queue=QUEUE, retry=Retry.none())
def blocks_until_let_go(n: int) -> None:
    me = current_job()
    assert me is not None
    spins[-1].started.set()
    held_threads[-1].wait(30)  # it looks at no flag: nothing stops it


@job(queue=QUEUE, retry=Retry.none(), timeout=0.2)
def blocks_past_its_timeout(n: int) -> None:
    blocks_until_let_go(n)


@pytest.mark.parametrize("ended", ["stopped at shutdown", "timed out before"])
async def test_a_sync_job_whose_thread_does_not_return_is_counted_as_left_behind(
    ended: str,
) -> None:
    """A timed-out attempt's thread was not counted (its attempt had ended), so the CLI worker
    waited for it at exit, as long as the job's code took, past the shutdown's bound."""
    spins.append(Spin())
    held_threads.append(threading.Event())
    store = MemoryStore()
    blocking = blocks_until_let_go if ended == "stopped at shutdown" else blocks_past_its_timeout
    [job_id] = await store.insert_jobs(  # one attempt, as enqueue stores for `Retry.none()`
        new_jobs(1, name=blocking.name, queue=QUEUE, payload='{"n": 1}', max_attempts=1)
    )
    worker = Worker(store, settings(shutdown_grace=0.0), Tracing())
    await worker.start()
    try:
        assert await in_thread(spins[-1].started)
        if ended == "timed out before":
            await worker._outcomes.flush()
            await eventually(
                lambda: _status_is(store, job_id, JobStatus.FAILED), "the attempt timed out"
            )
        await worker.stop()
        assert worker.abandoned == 1
    finally:
        held_threads[-1].set()
        await worker.stop()


async def test_a_worker_counts_only_its_own_threads_as_left_behind() -> None:
    """Every worker in a process counted every sync job's thread: one app's worker, stopping
    while another's job ran in its thread, said it left an attempt behind (and a CLI worker
    would have exited as if one of its jobs ignored cancellation)."""
    spins.append(Spin())
    held_threads.append(threading.Event())
    busy_store = MemoryStore()
    await busy_store.insert_jobs(
        new_jobs(1, name=blocks_until_let_go.name, queue=QUEUE, payload='{"n": 1}', max_attempts=1)
    )
    busy = Worker(busy_store, settings(shutdown_grace=0.0), Tracing())
    idle = Worker(MemoryStore(), settings(shutdown_grace=0.0), Tracing())
    await busy.start()
    await idle.start()
    try:
        assert await in_thread(spins[-1].started)
        await idle.stop()
        assert idle.abandoned == 0
    finally:
        held_threads[-1].set()
        await idle.stop()
        await busy.stop()
    assert busy.abandoned == 0  # its thread was let go before it stopped


async def _status_is(store: MemoryStore, job_id: int, status: JobStatus) -> bool:
    record = await store.get_job(job_id)
    return record is not None and record.status is status


@job(queue="logged-claims")
async def logged() -> None:
    pass


async def test_each_claim_is_logged_at_debug_only(
    jobs_dsn: str, caplog: pytest.LogCaptureFixture
) -> None:
    """docs/logging.md: `starlette_jobs.worker` at DEBUG adds a line per claim."""
    async with Jobs(jobs_dsn, queues={"logged-claims": 10}) as jobs:
        with caplog.at_level(logging.INFO, "starlette_jobs.worker"):
            await logged.enqueue()
            await jobs.drain()
        assert not [m for m in caplog.messages if "claimed" in m]
        with caplog.at_level(logging.DEBUG, "starlette_jobs.worker"):
            ids = await jobs.enqueue_many(logged, [{}, {}])  # one statement: one claim takes both
            await jobs.drain()
    claimed = [r for r in caplog.records if "claimed" in r.message]
    assert [(r.levelno, r.message) for r in claimed] == [
        (logging.DEBUG, f"queue 'logged-claims': claimed 2 job(s): {ids}")
    ]
