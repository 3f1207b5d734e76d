"""`Strays`: which names a worker's claims ask for, and when it adds a stray (a job no live
worker declares) to them. Counted from when this worker first saw it unrunnable, never from the
job's age; a paused queue's strays are left. Through `Jobs` on both stores:
contract/test_deploy_aware_contract.py."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from starlette_jobs.memory._store import MemoryStore
from starlette_jobs.worker._strays import Strays, strays_interval
from tests.contract.test_deploy_aware_contract import a_worker
from tests.records import new_jobs


def strays(store: MemoryStore, grace: float, paused: set[str] | None = None) -> Strays:
    woken: list[str] = []
    return Strays(
        store, ["default"], lambda: ("known.job",), grace, 0.05, woken.append,
        lambda queue: queue in (paused or set()),
    )  # fmt: skip


async def old_stray(store: MemoryStore) -> None:
    """A job of a name nobody declares, due an hour ago."""
    [job_id] = await store.insert_jobs(new_jobs(name="gone.job"))
    store._rows[job_id].run_at = datetime.now(UTC) - timedelta(hours=1)


async def test_claims_ask_for_the_declared_names_and_for_every_name_with_no_grace() -> None:
    store = MemoryStore()
    assert strays(store, 600).names("default") == ["known.job"]
    assert strays(store, 600).known == ["known.job"]
    assert strays(store, 0).names("default") is None
    assert strays(store, 0).known is None


async def test_an_old_stray_waits_a_whole_grace_from_when_this_worker_first_saw_it() -> None:
    # A fleet restarting in any order: the worker that knows the job may not have registered
    # yet, so a job's age is no reason to fail it at once.
    store = MemoryStore()
    await old_stray(store)
    looking = strays(store, 0.2)
    await looking.look()
    assert looking.names("default") == ["known.job"]
    await asyncio.sleep(0.25)  # the grace itself, not a wait for the worker
    await looking.look()
    assert looking.names("default") == ["gone.job", "known.job"]


async def test_a_stray_a_worker_now_declares_is_no_longer_claimed_for_failing() -> None:
    store = MemoryStore()
    await old_stray(store)
    looking = strays(store, 0.01)
    await looking.look()
    await asyncio.sleep(0.02)
    await looking.look()
    assert "gone.job" in (looking.names("default") or [])
    await store.register_worker(a_worker(("default",), ("gone.job",)))
    await looking.look()
    assert looking.names("default") == ["known.job"]


async def test_a_paused_queue_keeps_its_strays() -> None:
    store = MemoryStore()
    await old_stray(store)
    looking = strays(store, 0.01, paused={"default"})
    for _ in range(3):
        await looking.look()
        await asyncio.sleep(0.02)
    assert looking.names("default") == ["known.job"]


def test_strays_are_looked_for_as_often_as_upkeep_or_twice_a_short_grace() -> None:
    assert strays_interval(30, 600) == 10
    assert strays_interval(30, 4) == 2
    assert strays_interval(30, 0.001) == 0.05


async def test_a_job_declared_after_the_worker_started_is_claimed_too() -> None:
    declared: tuple[str, ...] = ("known.job",)
    looking = Strays(MemoryStore(), ["default"], lambda: declared, 600, 1.0, print, bool)
    assert looking.names("default") == ["known.job"]
    declared = ("known.job", "late.job")
    assert looking.names("default") == ["known.job", "late.job"]
    assert looking.known == ["known.job", "late.job"]
