"""What users ask of their jobs (`_queries.JobQueries`), over the in-memory store: ids that no
row can have, the errors of each change, and the store's outages as the library's error. The
same through `Jobs` on PostgreSQL is in integration/test_release_and_retention.py and
integration/test_bad_input.py."""

from __future__ import annotations

from typing import Any

import pytest

from starlette_jobs import (
    DatabaseUnavailableError,
    JobNotFoundError,
    JobStatus,
    UniqueKeyTakenError,
)
from starlette_jobs._queries import JobQueries
from starlette_jobs.memory._store import MemoryStore
from starlette_jobs.store._protocol import Store
from tests.records import new_jobs, outcome


class Queries(JobQueries):
    def __init__(self, store: Store) -> None:
        self._store = store

    @property
    def _ready_store(self) -> Store:
        return self._store


@pytest.fixture
def store() -> MemoryStore:
    return MemoryStore()


@pytest.fixture
def queries(store: MemoryStore) -> Queries:
    return Queries(store)


async def test_get_takes_an_id_as_an_int_or_as_its_digits(
    store: MemoryStore, queries: Queries
) -> None:
    [job_id] = await store.insert_jobs(new_jobs(1))
    given: Any
    for given in (job_id, str(job_id)):
        record = await queries.get(given)
        assert record is not None
        assert record.id == job_id


@pytest.mark.parametrize(
    "job_id",
    [0, -1, 2**63, True, "", "abc", "1.0", " 1", "+1", "\u0661", "9" * 20, 1.0, None, b"1"],
)
async def test_what_no_job_id_can_be_is_no_job_not_an_error(
    store: MemoryStore, queries: Queries, job_id: Any
) -> None:
    await store.insert_jobs(new_jobs(1))  # job 1 exists: True, "\u0661" and 1.0 must not find it
    assert await queries.get(job_id) is None


@pytest.mark.parametrize("change", ["cancel", "retry", "release"])
@pytest.mark.parametrize("job_id", [404, "404", -3, "x"])
async def test_changing_a_job_that_does_not_exist_raises_naming_the_id(
    queries: Queries, change: str, job_id: Any
) -> None:
    with pytest.raises(JobNotFoundError, match=f"no job with id {job_id!r}|no job with id 404"):
        await getattr(queries, change)(job_id)


async def test_each_change_applies_only_in_its_status(store: MemoryStore, queries: Queries) -> None:
    [pending, running] = await store.insert_jobs(new_jobs(2))
    await store.claim_batch("default", 1, "w", 30)  # the first one only
    running, pending = pending, running
    assert await queries.retry(pending) is False  # not failed
    assert await queries.release(pending) is False  # not running
    assert await queries.cancel(pending) is True
    assert await queries.retry(pending) is True  # cancelled: runs again
    assert await queries.release(running) is True
    assert await store.job_status(running) is JobStatus.PENDING
    assert await queries.cancel(running) is True  # pending again
    assert await queries.cancel(running) is False  # cancelled already


async def test_a_running_job_is_asked_to_stop_once_and_a_release_then_cancels_it(
    store: MemoryStore, queries: Queries
) -> None:
    [job_id] = await store.insert_jobs(new_jobs(1))
    await store.claim_batch("default", 1, "w", 30)
    assert await queries.cancel(job_id) is True
    assert await queries.cancel(job_id) is False  # asked already
    assert await queries.release(job_id) is True
    assert await store.job_status(job_id) is JobStatus.CANCELLED
    kinds = [event.kind.value for event in await queries.events(job_id)]
    assert kinds == ["enqueued", "claimed", "cancel_requested", "cancelled"]


async def test_retry_refuses_while_a_live_job_holds_the_unique_key(
    store: MemoryStore, queries: Queries
) -> None:
    [first] = await store.insert_jobs(new_jobs(1, unique_key="k"))
    [claim] = await store.claim_batch("default", 1, "w", 30)
    await store.record_outcomes([outcome(claim, JobStatus.FAILED, error="boom")])
    await store.insert_jobs(new_jobs(1, unique_key="k"))
    with pytest.raises(UniqueKeyTakenError, match=f"job {first} cannot be retried"):
        await queries.retry(first)


async def test_list_and_count_filter_by_status_given_as_a_string(
    store: MemoryStore, queries: Queries
) -> None:
    [first, _, third] = await store.insert_jobs(new_jobs(3))
    await store.insert_jobs(new_jobs(1, queue="other"))
    await queries.cancel(first)
    assert [r.id for r in await queries.list(status="cancelled")] == [first]
    assert [r.id for r in await queries.list(status=JobStatus.PENDING, queue="default")] == [
        third,
        first + 1,
    ]
    assert len(await queries.list(limit=2)) == 2
    counts = await queries.count_by_status(queue="default")
    assert counts == {**dict.fromkeys(JobStatus, 0), JobStatus.PENDING: 2, JobStatus.CANCELLED: 1}
    with pytest.raises(ValueError, match="'done' is not a valid JobStatus"):
        await queries.list(status="done")


async def test_release_worker_jobs_gives_back_that_workers_jobs_only(
    store: MemoryStore, queries: Queries
) -> None:
    await store.insert_jobs(new_jobs(3))
    mine = await store.claim_batch("default", 2, "host:1:dead", 30)
    await store.claim_batch("default", 1, "host:2:alive", 30)
    assert await queries.release_worker_jobs("host:1:dead") == [c.id for c in mine]
    assert await queries.release_worker_jobs("host:1:dead") == []


async def test_migrate_on_the_memory_store_has_nothing_to_apply(queries: Queries) -> None:
    assert await queries.migrate() == []


class Unreachable(MemoryStore):
    async def get_job(self, job_id: int) -> None:
        raise DatabaseUnavailableError("PostgreSQL is unreachable (connection refused)")

    async def cancel_job(self, job_id: int, by: str | None = None) -> JobStatus | None:
        raise DatabaseUnavailableError("PostgreSQL stopped answering (TimeoutError)")


async def test_an_unreachable_database_is_the_librarys_error_naming_the_call() -> None:
    queries = Queries(Unreachable())
    with pytest.raises(DatabaseUnavailableError, match="could not get job 5: "):
        await queries.get("5")  # type: ignore[arg-type]  # an id that came through a URL
    with pytest.raises(DatabaseUnavailableError, match="could not cancel job 5: "):
        await queries.cancel(5)


def test_without_a_store_queries_have_nothing_to_ask() -> None:
    with pytest.raises(NotImplementedError):
        _ = JobQueries()._ready_store
