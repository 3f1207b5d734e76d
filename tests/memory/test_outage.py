"""The in-memory store's outage switch (`memory._outage`): while it is on, every call of the
store fails as the PostgreSQL store's do when the database is unavailable, its listeners are
dropped, and nothing changes; it ends after a number of calls, a time, or when told."""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from starlette_jobs import DatabaseUnavailableError, JobStatus
from starlette_jobs.memory import _outage as outage_module
from starlette_jobs.memory._outage import STORE_CALLS, SimulatedOutage
from starlette_jobs.memory._store import MemoryStore
from starlette_jobs.memory._tables import MemoryData
from starlette_jobs.store._protocol import Store
from tests.records import new_jobs

# What works without the database on PostgreSQL too.
WITHOUT_THE_DATABASE = {"expire_connections", "close"}


def test_every_call_of_the_store_protocol_that_reaches_the_database_fails_in_an_outage() -> None:
    """A method added to the protocol is in STORE_CALLS, or the memory store would answer it
    through an outage that PostgreSQL's would not."""
    protocol = {
        name
        for name, member in inspect.getmembers(Store, inspect.iscoroutinefunction)
        if not name.startswith("_")
    }  # its parts' too (store/_parts.py)
    assert set(STORE_CALLS) == protocol - WITHOUT_THE_DATABASE


async def test_in_an_outage_every_call_fails_and_changes_nothing() -> None:
    store = MemoryStore()
    [job_id] = await store.insert_jobs(new_jobs())
    outage = SimulatedOutage(store.data, None, None)
    with pytest.raises(DatabaseUnavailableError, match=r"in-memory store is unavailable \(claim"):
        await store.claim_batch("default", 10, "w", 30)
    with pytest.raises(DatabaseUnavailableError):
        await store.insert_jobs(new_jobs())
    with pytest.raises(DatabaseUnavailableError):
        await store.listen(["default"], lambda _: None)
    await store.expire_connections()  # no call to the database: as on PostgreSQL
    assert outage.failed == ["claim_batch", "insert_jobs", "listen"]
    assert outage.active
    outage.end()
    assert not outage.active
    assert await store.job_status(job_id) is JobStatus.PENDING  # claimed by nobody
    assert await store.count_by_status(None) == {**dict.fromkeys(JobStatus, 0), "pending": 1}


async def test_an_outage_of_a_number_of_calls_ends_after_them() -> None:
    store = MemoryStore()
    outage = SimulatedOutage(store.data, 2, None)
    for _ in range(2):
        with pytest.raises(DatabaseUnavailableError):
            await store.get_job(1)
    assert not outage.active
    assert await store.get_job(1) is None
    assert outage.failed == ["get_job", "get_job"]


async def test_an_outage_of_a_time_ends_after_it(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [100.0]
    monkeypatch.setattr(outage_module, "clock", lambda: now[0])
    store = MemoryStore()
    outage = SimulatedOutage(store.data, None, 5)
    now[0] = 104.9
    with pytest.raises(DatabaseUnavailableError):
        await store.list_jobs(None, None, 10)
    now[0] = 105.0
    assert await store.list_jobs(None, None, 10) == []
    assert (outage.active, outage.failed) == (False, ["list_jobs"])


async def test_an_outage_drops_the_listeners_which_are_opened_again_after_it() -> None:
    """As PostgreSQL's LISTEN connections are dropped: a worker finds out through `alive`, and
    opens a new one once the database answers (waking every queue, as it may have missed)."""
    store = MemoryStore()
    woken: list[str] = []
    listener = await store.listen(["default"], woken.append)
    waits = await store.listen_for_outcomes(lambda _: None)
    with SimulatedOutage(store.data, None, None):
        assert not await listener.alive(1)
        assert not await waits.alive(1)
    await store.insert_jobs(new_jobs())
    assert woken == []  # the dropped listener hears nothing any more
    again = await store.listen(["default"], woken.append)
    assert await again.alive(1)
    await store.insert_jobs(new_jobs())
    assert woken == ["default"]


async def test_every_store_on_the_same_data_meets_the_outage_and_a_new_one_replaces_it() -> None:
    data = MemoryData()
    producer, worker = MemoryStore(data), MemoryStore(data)
    first = SimulatedOutage(data, None, None)
    second = SimulatedOutage(data, 1, None)
    assert not first.active  # replaced
    with pytest.raises(DatabaseUnavailableError):
        await worker.claim_batch("default", 1, "w", 30)
    first.end()  # ends nothing: it is over already
    assert await producer.insert_jobs(new_jobs()) == [1]
    assert (first.failed, second.failed) == ([], ["claim_batch"])


@pytest.mark.parametrize(
    ("calls", "seconds", "says"),
    [
        (1, 1.0, "not both"),
        (0, None, "calls must be a positive integer"),
        (True, None, "calls must be a positive integer"),
        (None, 0, "seconds must be a positive number"),
        (None, float("nan"), "seconds must be a positive number"),
        (None, float("inf"), "seconds must be a positive number"),
    ],
)
def test_a_count_or_a_time_that_cannot_end_an_outage_is_refused(
    calls: Any, seconds: Any, says: str
) -> None:
    data = MemoryData()
    with pytest.raises(ValueError, match=says):
        SimulatedOutage(data, calls, seconds)
    assert data.outage is None
