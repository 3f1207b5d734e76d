"""The enqueue path (`_enqueue.Enqueuer`) on the in-memory store: rows as the options say, the
payload limit, wake-ups only for jobs due now, the eager hook, and the store's errors as the
library's. Enqueueing through `Jobs` end to end is in integration/test_enqueue_and_run.py."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from starlette_jobs import (
    DatabaseUnavailableError,
    JobArgumentsError,
    JobStatus,
    NotStartedError,
    Retry,
    job,
)
from starlette_jobs._enqueue import Enqueuer
from starlette_jobs._job import NO_OPTIONS, EnqueueOptions
from starlette_jobs._records import NewJobs
from starlette_jobs._tracing import Tracing
from starlette_jobs.memory._store import MemoryStore
from starlette_jobs.store._protocol import Store


@job(queue="mail", priority=2, retry=Retry.fixed(max_attempts=4, delay=1))
async def send_mail(to: str) -> None:
    pass


def enqueuer(store: Store, max_payload_bytes: int = 1024) -> Enqueuer:
    return Enqueuer(lambda: store, Tracing(), max_payload_bytes)


async def test_one_row_per_payload_with_the_jobs_own_settings() -> None:
    store = MemoryStore()
    ids = await enqueuer(store).insert(send_mail, ['{"to": "a"}', '{"to": "b"}'], NO_OPTIONS)
    records = [await store.get_job(job_id) for job_id in ids]
    assert [(r.arguments, r.queue, r.priority, r.max_attempts) for r in records if r] == [
        ({"to": "a"}, "mail", 2, 4),
        ({"to": "b"}, "mail", 2, 4),
    ]
    assert all(r is not None and r.name == send_mail.name for r in records)


async def test_options_override_the_queue_and_priority_and_set_when_it_runs() -> None:
    store = MemoryStore()
    options = EnqueueOptions(queue="urgent", priority=-5, delay=3600)
    [job_id] = await enqueuer(store).insert(send_mail, ['{"to": "a"}'], options)
    record = await store.get_job(job_id)
    assert record is not None
    assert (record.queue, record.priority, record.status) == ("urgent", -5, JobStatus.PENDING)
    assert record.run_at > datetime.now(UTC) + timedelta(minutes=59)


async def test_a_unique_key_returns_the_live_jobs_id() -> None:
    store = MemoryStore()
    options = EnqueueOptions(unique_key="welcome:1")
    first = await enqueuer(store).insert(send_mail, ['{"to": "a"}'], options)
    again = await enqueuer(store).insert(send_mail, ['{"to": "b"}'], options)
    assert first == again
    assert len(await store.list_jobs(None, None, 10)) == 1


@pytest.mark.parametrize(
    ("when", "woken"),
    [
        ({}, ["mail"]),
        ({"delay": 0}, ["mail"]),
        ({"delay": 60}, []),
        ({"run_at": -60}, ["mail"]),  # seconds from now, made into a time below
        ({"run_at": 60}, []),
    ],
)
async def test_workers_are_woken_only_for_a_job_due_now(
    when: dict[str, float], woken: list[str]
) -> None:
    if "run_at" in when:
        options = EnqueueOptions(run_at=datetime.now(UTC) + timedelta(seconds=when["run_at"]))
    else:
        options = EnqueueOptions(delay=when.get("delay"))
    store = MemoryStore()
    notified: list[str] = []
    await store.listen(["mail"], notified.append)
    await enqueuer(store).insert(send_mail, ['{"to": "a"}'], options)
    assert notified == woken


async def test_after_enqueue_is_awaited_with_the_ids_once_written() -> None:
    store = MemoryStore()
    writer = enqueuer(store)
    seen: list[tuple[list[int], int]] = []

    async def after(ids: list[int]) -> None:
        seen.append((ids, len(await store.list_jobs(None, None, 10))))

    writer.after_enqueue = after
    ids = await writer.insert(send_mail, ['{"to": "a"}', '{"to": "b"}'], NO_OPTIONS)
    assert seen == [(ids, 2)]


def payload_of_bytes(size: int, character: str = "x") -> str:
    """A JSON text of `size` bytes in UTF-8."""
    return '{"to": "' + character * ((size - 10) // len(character.encode())) + '"}'


async def test_a_payload_over_the_limit_is_refused_before_anything_is_written() -> None:
    store = MemoryStore()
    with pytest.raises(JobArgumentsError) as refused:
        await enqueuer(store, max_payload_bytes=100).insert(
            send_mail, [payload_of_bytes(101)], NO_OPTIONS
        )
    [error] = refused.value.errors
    assert error["loc"] == ()
    assert error["type"] == "payload_too_large"
    assert "take 101 bytes as JSON, over the limit of 100 (max_payload_bytes)" in error["msg"]
    assert await store.list_jobs(None, None, 10) == []


async def test_the_limit_counts_utf8_bytes_not_characters() -> None:
    store = MemoryStore()
    writer = enqueuer(store, max_payload_bytes=100)
    await writer.insert(send_mail, [payload_of_bytes(100, "é")], NO_OPTIONS)  # exactly at it
    with pytest.raises(JobArgumentsError, match="102 bytes"):
        # 47 characters, 102 bytes: under the limit by length, over it by size.
        await writer.insert(send_mail, [payload_of_bytes(102, "é")], NO_OPTIONS)


async def test_in_a_batch_each_payload_over_the_limit_is_named_by_its_index() -> None:
    store = MemoryStore()
    payloads = [
        payload_of_bytes(50),
        payload_of_bytes(200),
        payload_of_bytes(50),
        payload_of_bytes(300),
    ]
    with pytest.raises(JobArgumentsError) as refused:
        await enqueuer(store, max_payload_bytes=100).insert(send_mail, payloads, NO_OPTIONS)
    assert [error["loc"] for error in refused.value.errors] == [(1,), (3,)]
    assert await store.list_jobs(None, None, 10) == []


async def test_a_store_not_ready_raises_its_own_error() -> None:
    def not_started() -> Store:
        raise NotStartedError("not started")

    with pytest.raises(NotStartedError):
        await Enqueuer(not_started, Tracing(), 1024).insert(send_mail, ["{}"], NO_OPTIONS)


class Unreachable(MemoryStore):
    async def insert_jobs(self, new: NewJobs, connection: Any | None = None) -> list[int]:
        raise DatabaseUnavailableError("PostgreSQL is unreachable (connection refused)")


async def test_an_unreachable_database_is_the_librarys_error_naming_the_call() -> None:
    writer = enqueuer(Unreachable())
    called: list[Sequence[int]] = []

    async def after(ids: list[int]) -> None:
        called.append(ids)

    writer.after_enqueue = after
    with pytest.raises(DatabaseUnavailableError, match=r"could not enqueue: .*unreachable"):
        await writer.insert(send_mail, ['{"to": "a"}'], NO_OPTIONS)
    assert called == []
