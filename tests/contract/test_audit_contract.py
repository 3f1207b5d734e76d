"""Who asked for an operator's change, in the job's events (`JobEvent.by`), on both stores."""

from __future__ import annotations

from starlette_jobs import JobStatus
from starlette_jobs._records import EventKind
from starlette_jobs.store._protocol import Store
from tests.records import new_jobs as new
from tests.records import outcome as ended

LEASE = 30.0


async def test_each_operators_change_names_who_asked_in_its_event(store: Store) -> None:
    failed, pending, running, stopping = await store.insert_jobs(new(4))
    claims = await store.claim_batch("default", 1, "w", LEASE)
    assert await store.record_outcomes([ended(claims[0], JobStatus.FAILED, error="boom")])
    assert await store.retry_job(failed, "ada@example.com") is True
    assert await store.cancel_job(pending, "grace") is JobStatus.CANCELLED
    claimed = {c.id for c in await store.claim_batch("default", 3, "w", LEASE)}
    assert {failed, running, stopping} == claimed
    assert await store.release_job(running, "linus") is True
    assert await store.cancel_job(stopping, "ken") is JobStatus.RUNNING

    async def trail(job_id: int) -> list[tuple[EventKind, str | None]]:
        return [(e.kind, e.by) for e in await store.job_events(job_id)]

    assert await trail(failed) == [
        (EventKind.ENQUEUED, None),
        (EventKind.CLAIMED, None),
        (EventKind.FAILED, None),
        (EventKind.RETRIED, "ada@example.com"),
        (EventKind.CLAIMED, None),
    ]
    assert (await trail(pending))[-1] == (EventKind.CANCELLED, "grace")
    assert (await trail(running))[-1] == (EventKind.RELEASED, "linus")
    assert (await trail(stopping))[-1] == (EventKind.CANCEL_REQUESTED, "ken")


async def test_a_change_that_names_no_one_records_none(store: Store) -> None:
    [pending] = await store.insert_jobs(new(1))
    assert await store.cancel_job(pending) is JobStatus.CANCELLED
    assert await store.retry_job(pending) is True
    assert [e.by for e in await store.job_events(pending)] == [None, None, None]
