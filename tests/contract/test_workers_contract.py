"""The worker registry (docs/workers.md) on both stores: a worker's row written, refreshed,
deleted at a clean stop, and pruned once unseen; `jobs.workers()` lists a running worker; the
jobs of a worker whose liveness lock is free rescued at once (PostgreSQL only). Several worker
processes, a killed one and a frozen one: processes/test_registry.py."""

from __future__ import annotations

import dataclasses
import os
import socket
import uuid

import pytest

from starlette_jobs import Jobs, JobStatus, WorkerRecord, __version__, job
from starlette_jobs._worker_records import NewWorker
from starlette_jobs.store._protocol import Store
from tests.records import new_jobs


@job(name="registry.contract.noop", queue="registry-contract")
async def noop() -> None:
    pass


def new_worker(worker_id: str, heartbeat_seconds: float = 10.0) -> NewWorker:
    return NewWorker(
        id=worker_id,
        host="web-1",
        pid=4242,
        queues=("default", "mail"),
        job_names=("mail.send", "reports.build"),
        version="1.2.3",
        heartbeat_seconds=heartbeat_seconds,
    )


async def test_a_registered_worker_is_listed_with_what_it_wrote(store: Store) -> None:
    await store.register_worker(new_worker("web-1:4242:aaaa"))
    [worker] = await store.list_workers()
    assert isinstance(worker, WorkerRecord)
    assert (worker.id, worker.host, worker.pid) == ("web-1:4242:aaaa", "web-1", 4242)
    assert worker.queues == ("default", "mail")
    assert worker.job_names == ("mail.send", "reports.build")
    assert (worker.version, worker.heartbeat_seconds) == ("1.2.3", 10.0)
    assert worker.started_at == worker.last_seen
    assert worker.started_at.tzinfo is not None


async def test_the_schedules_a_workers_code_declares_are_listed_by_worker(store: Store) -> None:
    first = new_worker("web-1:4242:aaaa")
    await store.register_worker(dataclasses.replace(first, schedules=(("beat", "h1"),)))
    await store.register_worker(new_worker("web-1:4242:bbbb"))  # declares none
    assert await store.worker_schedules() == {
        "web-1:4242:aaaa": {"beat": "h1"},
        "web-1:4242:bbbb": {},
    }
    await store.register_worker(dataclasses.replace(first, schedules=(("late", "h2"),)))
    await store.unregister_worker("web-1:4242:bbbb")
    assert await store.worker_schedules() == {"web-1:4242:aaaa": {"late": "h2"}}


async def test_workers_are_listed_by_id(store: Store) -> None:
    for worker_id in ("c", "a", "b"):
        await store.register_worker(new_worker(worker_id))
    assert [worker.id for worker in await store.list_workers()] == ["a", "b", "c"]


async def test_a_heartbeat_moves_last_seen_only(store: Store) -> None:
    await store.register_worker(new_worker("w"))
    [before] = await store.list_workers()
    assert await store.worker_seen("w") is True
    [after] = await store.list_workers()
    assert after.last_seen > before.last_seen
    assert after.started_at == before.started_at


async def test_a_heartbeat_without_a_row_says_so(store: Store) -> None:
    assert await store.worker_seen("never-registered") is False
    assert await store.list_workers() == []


async def test_a_clean_stop_deletes_the_row(store: Store) -> None:
    await store.register_worker(new_worker("leaving"))
    await store.register_worker(new_worker("staying"))
    await store.unregister_worker("leaving")
    await store.unregister_worker("leaving")  # twice: nothing more to delete
    assert [worker.id for worker in await store.list_workers()] == ["staying"]


async def test_workers_unseen_for_their_missed_heartbeats_are_pruned(store: Store) -> None:
    # A heartbeat every microsecond: three are missed by the time the prune runs.
    await store.register_worker(new_worker("dead", heartbeat_seconds=1e-6))
    await store.register_worker(new_worker("alive", heartbeat_seconds=3600.0))
    assert await store.prune_workers(3.0) == ["dead"]
    assert [worker.id for worker in await store.list_workers()] == ["alive"]
    assert await store.prune_workers(3.0) == []


async def test_registering_again_keeps_when_the_worker_started(store: Store) -> None:
    """A worker writes its row again when it takes its liveness lock again (after a server
    restart) or declares more job names: what it wrote is updated, and it is seen now, but it
    started when it first registered (the row said it started at each restart)."""
    await store.register_worker(new_worker("w"))
    [first] = await store.list_workers()
    await store.register_worker(new_worker("w", heartbeat_seconds=2.0))
    [again] = await store.list_workers()
    assert again.started_at == first.started_at
    assert again.last_seen > first.last_seen
    assert again.heartbeat_seconds == 2.0


async def test_a_worker_unseen_for_its_missed_heartbeats_is_dead_before_it_is_pruned(
    store: Store,
) -> None:
    """No live worker may be left to delete a dead one's row (the whole fleet was killed, or a
    web process without a worker is all that runs): it is not listed, and runs no job. Both
    used to be said of it until a live worker deleted its row, for ever if none came."""
    await store.register_worker(new_worker("dead", heartbeat_seconds=1e-6))
    [job_id] = await store.insert_jobs(new_jobs(1, name="mail.send", queue="mail"))
    assert await store.list_workers() == []
    [unrunnable] = await store.unrunnable_jobs()
    assert (unrunnable.queue, unrunnable.name, unrunnable.pending) == ("mail", "mail.send", 1)
    await store.register_worker(new_worker("alive", heartbeat_seconds=3600.0))
    assert [worker.id for worker in await store.list_workers()] == ["alive"]
    assert await store.unrunnable_jobs() == []
    assert await store.get_job(job_id) is not None


# -- through Jobs ------------------------------------------------------------------------------


@pytest.fixture
def dsn(postgres_dsn: str | None) -> str:
    return postgres_dsn or f"memory://workers-{uuid.uuid4().hex}"


async def test_jobs_workers_lists_a_running_worker_until_it_stops(dsn: str) -> None:
    async with Jobs(dsn, queues={"registry-contract": 2}, lease_duration=30) as jobs:
        [worker] = await jobs.workers()
        assert worker.id == jobs.worker_id
        assert (worker.host, worker.pid) == (socket.gethostname(), os.getpid())
        assert worker.queues == ("registry-contract",)
        assert "registry.contract.noop" in worker.job_names
        assert worker.version == __version__
        assert worker.heartbeat_seconds == 10.0
        async with Jobs(dsn, queues={}) as web:  # no worker of its own: lists the other
            assert [listed.id for listed in await web.workers()] == [jobs.worker_id]
    async with Jobs(dsn, queues={}) as web:
        assert await web.workers() == []


# -- liveness ----------------------------------------------------------------------------------


async def test_a_worker_that_never_registered_is_not_taken_for_dead(
    store: Store, postgres_dsn: str | None
) -> None:
    # A worker of an older version (no row, no lock): its jobs wait for their lease, as before.
    await store.insert_jobs(new_jobs(1, queue="old"))
    [claim] = await store.claim_batch("old", 1, "old-worker", 60.0)
    assert await store.rescue_dead_workers(100) == []
    assert await store.job_status(claim.id) is JobStatus.RUNNING


async def test_a_liveness_lock_answers_until_closed(store: Store) -> None:
    lock = await store.hold_liveness("w")
    assert await lock.alive(5.0) is True
    await lock.close()
