"""The worker's row in the registry (`worker/_registry.py`) on the in-memory store: written at
start, refreshed, written again if it was pruned, deleted at stop, and left to upkeep when the
store does not answer. Across real processes: processes/test_registry.py."""

from __future__ import annotations

import logging
import os

import pytest

from starlette_jobs import DatabaseUnavailableError, __version__, job, periodic
from starlette_jobs._schedules import forget_schedule, registered_schedules
from starlette_jobs._worker_records import MISSED_HEARTBEATS
from starlette_jobs.memory._store import MemoryStore
from starlette_jobs.worker._registry import Registration, new_worker
from starlette_jobs.worker._upkeep import Upkeep


@job(name="registry.unit.noop", queue="registry-unit")
async def noop() -> None:
    pass


def _held() -> bool:
    return True


def test_the_row_names_the_process_its_queues_and_the_jobs_its_code_declares() -> None:
    worker = new_worker("h:1:abc", ["a", "b"], 10.0)
    assert (worker.id, worker.pid, worker.version) == ("h:1:abc", os.getpid(), __version__)
    assert worker.queues == ("a", "b")
    assert "registry.unit.noop" in worker.job_names
    assert list(worker.job_names) == sorted(worker.job_names)


async def test_start_registers_and_stop_deletes_the_row() -> None:
    store = MemoryStore()
    registration = Registration(store, new_worker("w", ["a"], 10.0), timeout=1.0, holds_lock=_held)
    await registration.start()
    assert [worker.id for worker in await store.list_workers()] == ["w"]
    await registration.stop()
    assert await store.list_workers() == []


async def test_a_refresh_registers_again_a_row_pruned_meanwhile(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = MemoryStore()
    registration = Registration(store, new_worker("w", ["a"], 1e-6), timeout=1.0, holds_lock=_held)
    await registration.start()
    # Another worker's upkeep took it for dead (it could not reach the database for a while).
    await Upkeep(store, 1.0, None, lambda queue: None).prune_workers()
    assert await store.list_workers() == []
    with caplog.at_level(logging.WARNING, logger="starlette_jobs.worker"):
        await registration.refresh()
    # Its row again (with a heartbeat of a microsecond, it is not listed as live for long).
    assert list(await store.worker_schedules()) == ["w"]
    assert "worker w: its registry row was gone; registering again" in caplog.messages
    await registration.stop()


async def test_a_refresh_adds_a_job_declared_after_the_worker_started() -> None:
    store = MemoryStore()
    registration = Registration(store, new_worker("w", ["a"], 10.0), timeout=1.0, holds_lock=_held)
    await registration.start()

    @job(name="registry.declared_late")
    async def declared_late() -> None: ...

    await registration.refresh()
    [row] = await store.list_workers()
    assert declared_late.name in row.job_names
    await registration.stop()


async def test_a_refresh_adds_a_schedule_declared_after_the_worker_started() -> None:
    """The others read from the registry which schedules a worker's code holds (a deploy's
    two versions of the code, docs/schedules.md): one declared late is listed too."""
    store = MemoryStore()
    registration = Registration(store, new_worker("w", ["a"], 10.0), timeout=1.0, holds_lock=_held)
    await registration.start()
    periodic("0 * * * *", name="registry.late")(noop)
    try:
        (late,) = [s for s in registered_schedules() if s.name == "registry.late"]
        await registration.refresh()
        listed = (await store.worker_schedules())["w"]
        assert listed["registry.late"] == late.declared().definition_hash
    finally:
        forget_schedule("registry.late")
    await registration.stop()


class Unreachable(MemoryStore):
    async def unregister_worker(self, worker_id: str) -> None:
        raise DatabaseUnavailableError("connection refused")


async def test_a_row_the_stop_could_not_delete_is_left_to_upkeep(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = Unreachable()
    registration = Registration(store, new_worker("w", ["a"], 2.0), timeout=1.0, holds_lock=_held)
    await registration.start()
    with caplog.at_level(logging.WARNING, logger="starlette_jobs.worker"):
        await registration.stop()
    assert [worker.id for worker in await store.list_workers()] == ["w"]
    assert (
        "worker w: could not delete its row from the registry (connection refused): upkeep "
        f"deletes it once it is unseen for {2.0 * MISSED_HEARTBEATS:g} s"
    ) in caplog.messages
