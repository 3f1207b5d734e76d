"""The worker registry of the PostgreSQL store (`postgres/_registry.py`) where only PostgreSQL
can tell: a worker whose liveness lock the server let go (its process died) has its jobs
rescued at once. What both stores share: contract/test_workers_contract.py; several processes:
processes/test_registry.py."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

import asyncpg
import pytest

from starlette_jobs import DatabaseUnavailableError, JobStatus
from starlette_jobs._attempt_records import Claim
from starlette_jobs.postgres._store import PostgresStore
from starlette_jobs.store._protocol import Listener
from starlette_jobs.worker._liveness import Liveness
from tests.conftest import eventually
from tests.contract.test_workers_contract import new_worker
from tests.faultproxy import FaultProxy, named
from tests.records import new_jobs
from tests.records import outcome as ended


async def test_the_jobs_of_a_worker_whose_liveness_lock_is_free_are_rescued(
    database_dsn: str,
) -> None:
    # PostgreSQL only: in memory, a dead worker's process takes the store along with it.
    store = await PostgresStore.open(database_dsn, min_size=1, max_size=2)
    try:
        await _rescued(store)
    finally:
        await store.close()


async def _rescued(store: PostgresStore) -> None:
    await store.insert_jobs(new_jobs(2, queue="live", max_attempts=3))
    alive = await store.hold_liveness("alive")
    dead = await store.hold_liveness("dead")
    for worker_id in ("alive", "dead"):
        await store.register_worker(new_worker(worker_id))
    [kept] = await store.claim_batch("live", 1, "alive", 60.0)
    [lost] = await store.claim_batch("live", 1, "dead", 60.0)
    assert await store.rescue_dead_workers(100) == []  # both hold their lock

    await dead.close()  # as the server ends the connection of a killed process
    lockless = await store.lockless_workers(excluding="alive")
    [dead_row] = [worker for worker in await store.list_workers() if worker.id == "dead"]
    assert lockless == {"dead": dead_row.last_seen}
    assert await store.lockless_workers(excluding="dead") == {}  # its own lock is free
    # Only of the workers asked for: those found without their lock a while ago too...
    assert await store.rescue_dead_workers(100, "alive", among={"alive": dead_row.last_seen}) == []
    # ...and only while their row is as it was then (written since: alive then).
    earlier = {"dead": dead_row.last_seen - timedelta(microseconds=1)}
    assert await store.rescue_dead_workers(100, excluding="alive", among=earlier) == []
    # Never by itself: a worker whose lock was lost a moment ago stops its attempts itself.
    assert await store.rescue_dead_workers(100, excluding="dead") == []
    assert await store.rescue_dead_workers(100, excluding="alive") == [
        (lost.id, "live", JobStatus.PENDING)
    ]
    assert await store.job_status(kept.id) is JobStatus.RUNNING
    [record] = [job for job in await store.list_jobs(None, "live", 10) if job.id == lost.id]
    assert record.last_error == "worker dead died: its liveness connection closed"
    assert [worker.id for worker in await store.list_workers()] == ["alive"]
    # The dead worker's late outcome is refused: its lease token no longer holds the job.
    assert await store.record_outcomes([ended(lost, JobStatus.SUCCEEDED)]) == set()
    [again] = await store.claim_batch("live", 1, "alive", 60.0)
    assert again.id == lost.id
    assert await store.rescue_dead_workers(100) == []
    await alive.close()


async def test_a_stale_liveness_session_hands_its_lock_straight_to_the_new_one(
    fault_proxy: FaultProxy, database_dsn: str
) -> None:
    """A worker whose liveness connection the network dropped ends that stale session and takes
    its lock again. The lock must pass straight from the one to the other: a moment in which it
    is free is a moment in which a peer's rescue takes the worker's jobs (each loses its attempt;
    one without an attempt left fails). The worker's network is slow here (50 ms each way),
    which made that moment at least 100 ms long; a peer rescues in a loop meanwhile."""
    store = await PostgresStore.open(fault_proxy.dsn, min_size=1, max_size=2)
    peer = await PostgresStore.open(database_dsn, min_size=1, max_size=2)
    rescued: list[tuple[int, str, JobStatus]] = []
    stop_rescuing = asyncio.Event()

    async def rescue_in_a_loop() -> None:
        while not stop_rescuing.is_set():
            rescued.extend(await peer.rescue_dead_workers(100, excluding="peer"))

    try:
        await store.insert_jobs(new_jobs(1, queue="handover", max_attempts=1))
        stale = await store.hold_liveness("w")
        await store.register_worker(new_worker("w"))
        [claim] = await store.claim_batch("handover", 1, "w", 60.0)
        assert len(fault_proxy.blackhole(where=named("starlette_jobs liveness"))) == 1
        fault_proxy.set_delay(0.05)
        rescuing = asyncio.create_task(rescue_in_a_loop())
        try:
            again = await store.hold_liveness("w")
        finally:
            stop_rescuing.set()
            await rescuing
        assert rescued == []
        assert await store.job_status(claim.id) is JobStatus.RUNNING
        fault_proxy.set_delay(0.0)
        # The new session holds the lock: the worker is not taken for dead.
        assert await peer.rescue_dead_workers(100, excluding="peer") == []
        await again.close()
        stale.terminate()
    finally:
        await store.close()
        await peer.close()


async def test_a_liveness_lock_held_by_another_session_is_not_taken_from_it(
    database_dsn: str, connection: asyncpg.Connection[Any]
) -> None:
    """The key held by a session that is not the worker's own earlier one (a hash collision):
    the worker claims nothing, and never ends that session."""
    store = await PostgresStore.open(database_dsn, min_size=1, max_size=2)
    try:
        first = await store.hold_liveness("w")  # the worker's earlier session, then closed
        await first.close()
        await connection.execute("SELECT pg_advisory_lock(hashtextextended('w', 0))")
        with pytest.raises(DatabaseUnavailableError, match="held by another session"):
            await store.hold_liveness("w")
        assert await connection.fetchval("SELECT 1") == 1  # not ended
        assert await _advisory_locks_it_holds(connection) == 1
    finally:
        await store.close()


async def test_a_takeover_lost_to_another_waiter_says_so_under_a_short_statement_timeout(
    database_dsn: str, connection: asyncpg.Connection[Any]
) -> None:
    """The worker's stale session is ended, but a session that queued for the lock first is
    granted it: the takeover's wait ends at its own bound and the worker hears that another
    session holds the lock. With a worker statement timeout of 1 s the server's statement
    timeout (0.8 s) ended that wait before its bound (2 s), and the error said otherwise."""
    store = await PostgresStore.open(
        database_dsn, min_size=1, max_size=2, worker_statement_timeout=1.0
    )
    first = await store.hold_liveness("w")  # the worker's earlier session: holds the lock
    try:
        queued = asyncio.ensure_future(
            connection.execute("SELECT pg_advisory_lock(hashtextextended('w', 0))")
        )
        await eventually(_someone_waits_for_an_advisory_lock(store), "the session to queue")
        with pytest.raises(DatabaseUnavailableError, match="held by another session"):
            await store.hold_liveness("w")
        await queued  # granted as the earlier session ended
        assert await _advisory_locks_it_holds(connection) == 1
    finally:
        await first.close()
        await store.close()


def _someone_waits_for_an_advisory_lock(store: PostgresStore) -> Callable[[], Awaitable[bool]]:
    async def waits() -> bool:
        return bool(
            await store.pool.fetchval(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
                " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
            )
        )

    return waits


async def _advisory_locks_it_holds(connection: asyncpg.Connection[Any]) -> int:
    return int(
        await connection.fetchval(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted"
            " AND pid = pg_backend_pid()"
        )
    )


class SilentAsItTakesOver(PostgresStore):
    """The worker's network goes silent again in the middle of a takeover: once its new
    liveness session waits for the lock, that session's connection is blackholed too, just
    before the pool's statement ends the stale session (which the server then hands the lock
    to the new, now unreachable one)."""

    fault_proxy: FaultProxy
    looking: asyncpg.Connection[Any]
    silenced = False

    async def _worker_write(self, method: str, query: str, *args: Any) -> Any:
        if query == self._q["end_stale_liveness"] and not self.silenced:

            async def waits() -> bool:
                return bool(
                    await self.looking.fetchval(
                        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
                        " AND database ="
                        " (SELECT oid FROM pg_database WHERE datname = current_database())"
                    )
                )

            await eventually(waits, "the new session's wait reaches the server")
            self.silenced = True
            self.fault_proxy.blackhole(where=named("starlette_jobs liveness"))
        return await super()._worker_write(method, query, *args)


async def test_a_takeover_cut_short_leaves_no_lock_the_worker_cannot_take_back(
    fault_proxy: FaultProxy, database_dsn: str, connection: asyncpg.Connection[Any]
) -> None:
    """A takeover whose new session is cut (no answer in time) after the stale session was
    ended: the server grants the lock to that new session, which the worker no longer reaches,
    and behind a proxy or a NAT that still answers it keeps the lock for good. It is a session
    of the worker's own, so the worker's next attempt ends it and holds the lock; before, every
    attempt failed with "held by another session" and the worker never claimed again."""
    store = await SilentAsItTakesOver.open(
        fault_proxy.dsn, min_size=1, max_size=2, worker_statement_timeout=1.0
    )
    store.fault_proxy, store.looking = fault_proxy, connection
    try:
        stale = await store.hold_liveness("w")
        fault_proxy.blackhole(where=named("starlette_jobs liveness"))
        with pytest.raises(DatabaseUnavailableError):
            await store.hold_liveness("w")
        assert store.silenced
        # The server granted the lock to the session cut short, which the proxy keeps open.
        assert await connection.fetchval(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted"
            " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
        )
        again = await store.hold_liveness("w")  # the liveness check's next attempt
        assert await again.alive(1.0)
        await again.close()
        stale.terminate()
    finally:
        await store.close()


def _rescuer(store: PostgresStore, *, interval: float, dead_after: float) -> Liveness:
    """A worker's liveness, to call `rescue` on: it holds its own lock once started."""

    async def nothing() -> None: ...

    return Liveness(
        store, "rescuer", interval, 1.0, list, lambda queue: None, nothing, lambda: None,
        dead_after=dead_after,
    )  # fmt: skip


async def _a_peer_running_a_job(store: PostgresStore) -> tuple[Listener, Claim]:
    """A registered peer holding its liveness lock, and the job of one attempt it runs."""
    await store.insert_jobs(new_jobs(1, queue="peer", max_attempts=1))
    peer = await store.hold_liveness("peer")
    await store.register_worker(new_worker("peer"))
    [claim] = await store.claim_batch("peer", 1, "peer", 60.0)
    return peer, claim


async def test_a_peer_whose_lock_was_freed_a_moment_ago_is_not_taken_for_dead(
    database_dsn: str,
) -> None:
    """An operator ending every liveness session at once (`pg_terminate_backend`) ends them one
    after another: a rescue between two saw a live peer's lock free and its own still held, and
    took the peer's running job (failed, with no attempt left). A peer is dead once its lock
    has stayed free a while (two of its checks); a live one takes it again at the first."""
    store = await PostgresStore.open(database_dsn, min_size=1, max_size=3)
    liveness = _rescuer(store, interval=0.05, dead_after=0.5)
    try:
        peer, claim = await _a_peer_running_a_job(store)
        await liveness.start()  # rescues every 0.05 s from now on, as a worker does
        await peer.close()  # the first session the operator ends
        await liveness.rescue()
        assert await store.job_status(claim.id) is JobStatus.RUNNING
        peer = await store.hold_liveness("peer")  # the peer's next check takes it again
        await asyncio.sleep(0.6)  # rounds of the rescue that find it held, past `dead_after`
        await peer.close()  # now for good: the peer died
        await liveness.rescue()  # freed a moment ago, not since the first time
        assert await store.job_status(claim.id) is JobStatus.RUNNING

        async def rescued() -> bool:
            return await store.job_status(claim.id) is JobStatus.FAILED

        await eventually(rescued, "the dead peer's job to be rescued")
    finally:
        await liveness.stop()
        await store.close()


async def test_a_peer_whose_lock_is_freed_each_time_it_takes_it_again_is_not_taken_for_dead(
    database_dsn: str,
) -> None:
    """A live peer whose liveness session is ended each time just after it takes its lock again
    (an operator's script, a flapping network): every look of the rescue finds the lock free,
    though the peer holds it between them, and would take it for dead (its running job failed,
    with no attempt left; a success it had finished refused). A live peer writes its row each
    time it takes its lock again; one that wrote nothing since it was first found without it is
    dead."""
    store = await PostgresStore.open(database_dsn, min_size=1, max_size=3)
    liveness = _rescuer(store, interval=60.0, dead_after=0.3)  # rescues when told to, here
    try:
        peer, claim = await _a_peer_running_a_job(store)
        await liveness.start()
        await peer.close()
        await liveness.rescue()  # first found without its lock
        for _ in range(3):
            peer = await store.hold_liveness("peer")  # the peer's check takes it again...
            await store.register_worker(new_worker("peer"))  # ...and writes its row
            await peer.close()  # ended again at once
            await asyncio.sleep(0.35)  # past `dead_after` since the lock was first found free
            await liveness.rescue()
            assert await store.job_status(claim.id) is JobStatus.RUNNING
        await asyncio.sleep(0.35)  # nothing written since the last look: the peer is dead
        await liveness.rescue()
        assert await store.job_status(claim.id) is JobStatus.FAILED
    finally:
        await liveness.stop()
        await store.close()
