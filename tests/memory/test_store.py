"""The in-memory store (`_memory`) as a module: `memory://` URLs, stores shared by name, and
what it keeps as PostgreSQL would. The semantics it shares with PostgreSQL are held by
contract/test_store_contract.py."""

from __future__ import annotations

import gc
import json

import pytest

from starlette_jobs import Jobs, JobStatus, MemoryStoreUnsupportedError, job
from starlette_jobs.memory._store import MemoryStore, is_memory_dsn, memory_store
from tests.records import new_jobs, outcome


@pytest.mark.parametrize(
    ("dsn", "memory"),
    [
        ("memory://", True),
        ("memory://shared", True),
        ("postgresql://db/jobs", False),
        ("memory:/x", False),
        ("MEMORY://", False),
    ],
)
def test_memory_urls_are_told_apart(dsn: str, memory: bool) -> None:
    assert is_memory_dsn(dsn) is memory


def test_an_unnamed_url_gets_a_store_of_its_own_each_time() -> None:
    assert memory_store("memory://") is not memory_store("memory://")


async def test_a_named_url_shares_one_stores_data_while_something_holds_it() -> None:
    held = memory_store("memory://test-memory-shared")
    again = memory_store("memory://test-memory-shared")
    # A store each (each `Jobs` its own settings), over one set of rows.
    assert again is not held
    assert again.data is held.data
    assert memory_store("memory://test-memory-other").data is not held.data
    await held.insert_jobs(new_jobs(1))
    assert len(await again.list_jobs(None, None, 10)) == 1
    del held, again
    gc.collect()
    # Forgotten once no `Jobs` holds it: a later test with the same name starts empty.
    assert await memory_store("memory://test-memory-shared").list_jobs(None, None, 10) == []


def test_a_schema_of_a_named_store_is_a_separate_set_of_tables() -> None:
    """`Jobs("memory://name", schema=...)`: as two schemas of one PostgreSQL database."""
    plain = memory_store("memory://test-memory-schemas")
    billing = memory_store("memory://test-memory-schemas", "billing")
    assert billing.data is memory_store("memory://test-memory-schemas", "billing").data
    assert billing.data is not plain.data
    assert billing.data is not memory_store("memory://test-memory-schemas", "mail").data


ran: list[str] = []


@job(queue="memory-tests")
async def remember(word: str) -> None:
    ran.append(word)


async def test_two_jobs_instances_naming_one_store_are_a_producer_and_its_worker(
    jobs_memory: str,
) -> None:
    ran.clear()
    async with (
        Jobs(jobs_memory, queues={}) as producer,
        Jobs(jobs_memory, queues={"memory-tests": 1}) as worker,
    ):
        job_id = await producer.enqueue(remember, word="hello")
        await worker.drain(10)
        record = await producer.get(job_id)
    assert ran == ["hello"]
    assert record is not None
    assert record.status is JobStatus.SUCCEEDED


async def test_arguments_are_kept_in_canonical_json_as_jsonb_would() -> None:
    store = MemoryStore()
    [job_id] = await store.insert_jobs(new_jobs(1, payload='{ "b":1,  "a" : [1,2] }'))
    [claim] = await store.claim_batch("default", 1, "w", 30)
    assert claim.id == job_id
    assert json.loads(claim.payload) == {"b": 1, "a": [1, 2]}
    assert claim.payload == '{"a": [1, 2], "b": 1}'  # jsonb's key order, as PostgreSQL's


async def test_each_failed_attempt_is_kept_with_its_worker() -> None:
    store = MemoryStore()
    [job_id] = await store.insert_jobs(new_jobs(1))
    [claim] = await store.claim_batch("default", 1, "host:1:abc", 30)
    await store.record_outcomes([outcome(claim, JobStatus.PENDING, delay=0, error="boom")])
    record = await store.get_job(job_id)
    assert record is not None
    assert record.last_error == "boom"
    [entry] = record.errors
    assert (entry["attempt"], entry["error"], entry["worker_id"]) == (1, "boom", "host:1:abc")
    assert isinstance(entry["at"], str)


async def test_joining_a_transaction_is_refused_saying_what_to_do() -> None:
    with pytest.raises(MemoryStoreUnsupportedError, match="test that code on PostgreSQL"):
        await MemoryStore().insert_jobs(new_jobs(1), connection=object())


async def test_the_store_has_no_schema_and_no_connections() -> None:
    store = MemoryStore()
    assert store.name == "memory"
    assert await store.migrate() == []
    await store.check_schema(complete=True)
    await store.expire_connections()


async def test_a_closed_listener_hears_nothing_more() -> None:
    store = MemoryStore()
    heard: list[str] = []
    listener = await store.listen(["default"], heard.append)
    assert await listener.alive(1.0)
    await store.insert_jobs(new_jobs(1))
    await listener.close()
    await store.insert_jobs(new_jobs(1))
    assert heard == ["default"]


async def test_closing_the_store_silences_every_listener() -> None:
    store = MemoryStore()
    heard: list[str] = []
    await store.listen(["default"], heard.append)
    await store.listen(["default"], heard.append)
    store.terminate()
    await store.insert_jobs(new_jobs(1))
    assert heard == []


async def test_a_claim_looks_at_the_pending_jobs_of_its_queue_whatever_changed_them() -> None:
    """The index of pending jobs by queue (`RowTable`) follows each change of status, wherever
    it is made: a retry, a release, a cancel, a rescue; a claim then finds the job, or not."""
    store = MemoryStore()
    [retried, released, cancelled] = await store.insert_jobs(new_jobs(3, max_attempts=2))
    claims = {c.id: c for c in await store.claim_batch("default", 3, "w", 30)}
    assert await store.claim_batch("default", 3, "w", 30) == []  # all running
    await store.record_outcomes([outcome(claims[retried], JobStatus.PENDING, delay=0.0)])
    await store.release_jobs([(released, claims[released].lease_token)])
    await store.cancel_job(cancelled)
    again = sorted(c.id for c in await store.claim_batch("default", 3, "w", 30))
    assert again == sorted([retried, released])  # the cancelled one, running, is not pending
    [other] = await store.insert_jobs(new_jobs(1, queue="other"))
    assert [c.id for c in await store.claim_batch("other", 1, "w", 30)] == [other]
    assert await store.claim_batch("default", 3, "w", 30) == []
