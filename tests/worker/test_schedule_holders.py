"""`worker/_schedule_holders.py`: whose definition of a schedule holds while workers of two
versions of the code run (the ticker's rounds through it: tests/worker/test_ticker.py)."""

from __future__ import annotations

from datetime import UTC, datetime

from starlette_jobs._schedule_records import StoredSchedule
from starlette_jobs._worker_records import NewWorker
from starlette_jobs.memory._store import MemoryStore
from starlette_jobs.worker._schedule_holders import (
    as_declared,
    defined_otherwise,
    held_by_no_other,
)

AT = datetime(2026, 5, 1, 12, tzinfo=UTC)


def stored(name: str, definition_hash: str) -> StoredSchedule:
    definition = {"cron": "* * * * *", "name": name}
    return StoredSchedule(name, definition, definition_hash, AT, None, None, None)


async def register(store: MemoryStore, worker_id: str, **schedules: str) -> None:
    held = tuple(sorted(schedules.items()))
    await store.register_worker(NewWorker(worker_id, "host", 1, ("q",), (), "1", 1.0, held))


def test_a_schedule_stored_otherwise_or_missing_is_defined_otherwise() -> None:
    rows = {"beat": stored("beat", "old"), "same": stored("same", "h")}
    assert defined_otherwise({"beat": "new", "same": "h", "report": "r"}, rows) == [
        "beat",
        "report",
    ]


async def test_only_the_code_of_another_live_worker_that_declares_schedules_holds_one() -> None:
    store = MemoryStore()
    rows = {"beat": stored("beat", "old")}  # "report" was deleted by the old code's start
    await register(store, "me", beat="new", report="r")
    await register(store, "plain")  # declares no schedule: no say
    assert await held_by_no_other(store, "me", ["beat", "report"], rows) == ["beat", "report"]
    await register(store, "old", beat="old")
    assert await held_by_no_other(store, "me", ["beat", "report"], rows) == []
    await store.unregister_worker("old")
    await register(store, "newer", beat="new", report="r")  # my code's: holds none stored
    assert await held_by_no_other(store, "me", ["beat", "report"], rows) == ["beat", "report"]


async def test_a_worker_not_in_the_registry_cannot_tell_and_stands_by() -> None:
    store = MemoryStore()
    assert await held_by_no_other(store, "me", ["beat"], {"beat": stored("beat", "old")}) == []


def test_a_stored_schedule_is_declared_again_as_it_was_written() -> None:
    again = as_declared(stored("beat", "h"))
    assert (again.name, again.definition_hash) == ("beat", "h")
    assert again.definition == '{"cron":"* * * * *","name":"beat"}'
