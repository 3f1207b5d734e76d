"""A worker whose liveness connection is ended (an operator's `pg_terminate_backend`, or a cut
network) stops its attempts at once, since other workers may take their jobs now, takes its
lock again, and gives the jobs back: they run again (docs/workers.md, liveness)."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Awaitable, Callable
from typing import Any

import asyncpg
import pytest

from starlette_jobs import DatabaseUnavailableError, EventKind, Jobs, JobStatus, job
from starlette_jobs.store._protocol import Listener
from tests.conftest import StartJobs, eventually, on_postgres
from tests.faultproxy import FaultProxy, named

started: list[int] = []
stopped: list[int] = []
_go_on = asyncio.Event()  # made anew by each test: an event belongs to one loop


@job(queue="liveness")
async def watched(n: int) -> str:
    started.append(n)
    try:
        await _go_on.wait()
    except asyncio.CancelledError:
        stopped.append(n)
        raise
    return "done"


TERMINATE_LIVENESS = """
    SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
     WHERE datname = current_database() AND application_name = 'starlette_jobs liveness'
"""


async def test_a_worker_that_loses_its_liveness_connection_stops_its_attempts_at_once(
    start_jobs: StartJobs, connection: asyncpg.Connection[Any]
) -> None:
    global _go_on
    started.clear()
    stopped.clear()
    _go_on = asyncio.Event()
    async with start_jobs(queues={"liveness": 2}, lease_duration=60) as jobs:
        job_id = await watched.enqueue(n=1)
        await eventually(lambda: _true(started == [1]), "the job to start")
        assert await connection.fetchval(TERMINATE_LIVENESS) == 1

        # Within a liveness round (a second): the attempt is stopped, the job given back
        # (its attempt with it) and claimed again, not left for its 60 s lease.
        await eventually(lambda: _true(started == [1, 1]), "the job to run again", timeout=5)
        assert stopped == [1]
        _go_on.set()
        assert await jobs.result(watched, job_id, timeout=5) == "done"
        record = await jobs.get(job_id)
        assert record is not None
        assert (record.status, record.attempts) == (JobStatus.SUCCEEDED, 1)
        # It holds its lock again: the others do not take it for dead.
        assert [worker.id for worker in await jobs.workers()] == [jobs.worker_id]
        assert (
            await connection.fetchval(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                " AND application_name = 'starlette_jobs liveness'"
            )
            == 1
        )


thread_started: list[int] = []
thread_go_on = threading.Event()


@job(queue="liveness-sync")
def watched_in_a_thread(n: int) -> str:
    thread_started.append(n)
    assert thread_go_on.wait(timeout=60)
    return "done"


async def test_a_sync_job_runs_on_through_a_lost_liveness_lock_and_only_once(
    start_jobs: StartJobs, connection: asyncpg.Connection[Any], caplog: pytest.LogCaptureFixture
) -> None:
    """A `def` job's thread cannot be stopped: when the worker lost its liveness lock (a server
    restart ends every session), it gave the job back all the same once it held the lock
    again, and the job ran a second time beside the first, its first outcome refused. The job
    is kept now, and runs to its end once, under the same lease."""
    thread_started.clear()
    thread_go_on.clear()
    async with start_jobs(queues={"liveness-sync": 2}, lease_duration=60) as jobs:
        job_id = await watched_in_a_thread.enqueue(n=1)
        await eventually(lambda: _true(thread_started == [1]), "the job to start")
        with caplog.at_level(logging.WARNING, logger="starlette_jobs.worker"):
            assert await connection.fetchval(TERMINATE_LIVENESS) == 1
            await eventually(
                lambda: _true(any("holds its liveness lock again" in m for m in caplog.messages)),
                "the lock to be held again",
            )
        record = await jobs.get(job_id)
        assert record is not None
        assert (record.status, record.attempts) == (JobStatus.RUNNING, 1)  # not given back
        thread_go_on.set()
        assert await jobs.result(watched_in_a_thread, job_id, timeout=10) == "done"
        assert thread_started == [1]
        record = await jobs.get(job_id)
        assert record is not None
        assert (record.status, record.attempts) == (JobStatus.SUCCEEDED, 1)
    assert any("run on in their threads" in message for message in caplog.messages)


async def test_when_every_lock_is_freed_at_once_no_worker_takes_the_others_for_dead(
    start_jobs: StartJobs, connection: asyncpg.Connection[Any]
) -> None:
    """As a restart of the server does: every worker's lock is free a moment, each takes its
    own again within a liveness round. The first to do so rescued the others' running jobs
    as a dead worker's (failing those with no attempt left, and refusing their outcomes)."""
    global _go_on
    started.clear()
    stopped.clear()
    _go_on = asyncio.Event()
    async with (
        start_jobs(queues={"liveness": 1}, lease_duration=60) as one,
        start_jobs(queues={"liveness": 1}, lease_duration=60) as other,
    ):
        ids = [await watched.enqueue(n=n) for n in (1, 2)]

        async def each_runs_one() -> bool:
            running = [await one.get(job_id) for job_id in ids]
            workers = {record.worker_id for record in running if record is not None}
            return len(started) == 2 and workers == {one.worker_id, other.worker_id}

        await eventually(each_runs_one, "each worker to run one job")
        assert await connection.fetchval(TERMINATE_LIVENESS) == 2
        # Each stops its attempt and gives its job back, as one alone does (above).
        await eventually(lambda: _true(len(started) == 4), "both jobs to run again", timeout=10)
        _go_on.set()
        for job_id in ids:
            assert await one.result(watched, job_id, timeout=10) == "done"
            kinds = [event.kind for event in await one.events(job_id)]
            assert EventKind.RESCUED not in kinds, kinds
        live = {worker.id for worker in await one.workers()}
        assert live == {one.worker_id, other.worker_id}


async def _true(value: bool) -> bool:
    return value


class Unreachable:
    """The liveness lock cannot be taken again (the worker's host is cut off from the database,
    while its pool's connections still answer) until `reachable` is set."""

    def __init__(self, hold: Callable[[str], Awaitable[Listener]]) -> None:
        self._hold = hold
        self.reachable = False
        self.tries = 0

    async def __call__(self, worker_id: str) -> Listener:
        self.tries += 1
        if not self.reachable:
            raise DatabaseUnavailableError("the liveness lock's host is cut off (test)")
        return await self._hold(worker_id)


async def test_without_its_liveness_lock_a_worker_claims_nothing_and_writes_no_registry_row(
    start_jobs: StartJobs, connection: asyncpg.Connection[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    # After a partition heals, a worker whose lock was freed meanwhile must not claim, nor write
    # its registry row again, before it holds the lock again: a peer would take it for dead
    # and rescue the jobs it had just claimed, which would then run twice.
    global _go_on
    started.clear()
    stopped.clear()
    _go_on = asyncio.Event()
    async with start_jobs(queues={"liveness": 2}, lease_duration=3) as jobs:
        store = on_postgres(jobs)
        unreachable = Unreachable(store.hold_liveness)
        monkeypatch.setattr(store, "hold_liveness", unreachable)
        assert await connection.fetchval(TERMINATE_LIVENESS) == 1
        await eventually(lambda: _true(unreachable.tries >= 1), "the worker to find its lock lost")

        async def peer_rescues() -> None:  # another worker's liveness round, as often as it can
            while True:
                await store.rescue_dead_workers(1000)
                await asyncio.sleep(0.05)

        peer = asyncio.create_task(peer_rescues())
        try:
            job_id = await watched.enqueue(n=1)
            # Three more rounds of its liveness check (a second each), past a heartbeat that
            # would write the registry row again (every lease / 3 = 1 s).
            await eventually(lambda: _true(unreachable.tries >= 4), "more liveness rounds")
            assert started == []
            waiting = await jobs.get(job_id)
            assert waiting is not None
            assert waiting.status is JobStatus.PENDING
            assert await jobs.workers() == []

            unreachable.reachable = True
            await eventually(lambda: _true(started == [1]), "the job to start")
            assert [worker.id for worker in await jobs.workers()] == [jobs.worker_id]
            _go_on.set()
            assert await jobs.result(watched, job_id, timeout=5) == "done"
        finally:
            peer.cancel()
            await asyncio.gather(peer, return_exceptions=True)
        assert (started, stopped) == ([1], [])
        kinds = [event.kind for event in await jobs.events(job_id)]
        assert "rescued" not in kinds


async def test_a_liveness_connection_the_network_dropped_silently_is_ended_and_the_lock_taken_again(
    fault_proxy: FaultProxy, connection: asyncpg.Connection[Any]
) -> None:
    # The network drops the lock's connection without a word: the server does not know it is
    # gone, so that session keeps the lock. The worker ends its own stale session and takes the
    # lock again at once, rather than waiting (claiming nothing) until the server notices.
    global _go_on
    started.clear()
    stopped.clear()
    _go_on = asyncio.Event()
    async with Jobs(fault_proxy.dsn, queues={"liveness": 2}, lease_duration=3) as jobs:
        assert len(fault_proxy.blackhole(where=named("starlette_jobs liveness"))) == 1
        await eventually(
            lambda: _true(len(fault_proxy.matching(named("starlette_jobs liveness"))) == 2),
            "the worker to open a new liveness connection",
        )
        # The stale session is ended, the new one holds the lock: one liveness session.
        await eventually(
            lambda: _fetch_true(connection, LIVENESS_SESSIONS_IS_ONE), "the stale session to end"
        )
        job_id = await watched.enqueue(n=1)
        await eventually(lambda: _true(started == [1]), "the job to start")
        assert [worker.id for worker in await jobs.workers()] == [jobs.worker_id]
        _go_on.set()
        assert await jobs.result(watched, job_id, timeout=5) == "done"
        kinds = [event.kind for event in await jobs.events(job_id)]
        fault_proxy.heal()
    assert "rescued" not in kinds
    assert started == [1]


LIVENESS_SESSIONS_IS_ONE = """
    SELECT count(*) = 1 FROM pg_stat_activity
     WHERE datname = current_database() AND application_name = 'starlette_jobs liveness'
"""


async def _fetch_true(connection: asyncpg.Connection[Any], query: str) -> bool:
    return bool(await connection.fetchval(query))


LOCK_HELD = """
    SELECT count(*) = 1 FROM pg_locks
     WHERE locktype = 'advisory' AND granted AND objsubid = 1
       AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
       AND ((classid::int8 << 32) | objid::int8) = hashtextextended($1, 0)
"""


async def test_a_lock_whose_network_comes_back_stays_held_until_the_worker_takes_it_again(
    fault_proxy: FaultProxy, connection: asyncpg.Connection[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker that finds its lock's connection silent closes it only once its new session
    holds the lock. Closed at once, the close reached the server the moment the network came
    back, before the new session waited for the lock: the lock was free until the worker's
    next round, and a peer's rescue took the worker for dead."""
    async with Jobs(fault_proxy.dsn, queues={"liveness": 1}, lease_duration=3) as jobs:
        worker_id = jobs.worker_id
        store = on_postgres(jobs)
        unreachable = Unreachable(store.hold_liveness)
        monkeypatch.setattr(store, "hold_liveness", unreachable)
        fault_proxy.blackhole()  # the worker's host is cut off
        await eventually(lambda: _true(unreachable.tries >= 1), "the worker to find it lost")
        assert await connection.fetchval(LOCK_HELD, worker_id)  # the stale session holds it
        fault_proxy.heal()
        free_seen: list[int] = []
        healed_at = unreachable.tries

        async def look(until: Callable[[], bool]) -> None:
            """Looks at the lock as often as it can until `until()`."""
            while not until():
                if not await connection.fetchval(LOCK_HELD, worker_id):
                    free_seen.append(unreachable.tries)
                await asyncio.sleep(0)

        # Two more rounds that cannot take the lock again: the stale session keeps it.
        await asyncio.wait_for(look(lambda: unreachable.tries >= healed_at + 2), 10)
        unreachable.reachable = True
        liveness = jobs._worker._liveness if jobs._worker is not None else None
        assert liveness is not None
        await asyncio.wait_for(look(lambda: liveness.held), 10)
        assert free_seen == []
        assert await connection.fetchval(LOCK_HELD, worker_id)
