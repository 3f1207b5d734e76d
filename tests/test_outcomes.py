"""Group commit of outcomes, on the in-memory store: fenced writes, held leases, flushing."""

from __future__ import annotations

from starlette_jobs import JobStatus
from starlette_jobs._memory import MemoryStore
from starlette_jobs._outcomes import OutcomeWriter
from starlette_jobs._records import Claim, Outcome
from tests.records import new_jobs, outcome


def succeeded(claim: Claim) -> Outcome:
    return outcome(claim, JobStatus.SUCCEEDED, result='"done"')


async def test_outcomes_added_together_are_written_and_their_leases_held_until_then() -> None:
    store = MemoryStore()
    await store.insert_jobs(new_jobs(3))
    claims = await store.claim_batch("default", 3, "w", 30)
    writer = OutcomeWriter(store)
    for claim in claims:
        writer.add(succeeded(claim))
    # Not written yet: the worker keeps renewing these leases meanwhile.
    assert sorted(writer.held()) == sorted((c.id, c.lease_token) for c in claims)
    writer.start()
    await writer.flush()
    assert writer.held() == []
    for claim in claims:
        record = await store.get_job(claim.id)
        assert record is not None
        assert (record.status, record.result) == (JobStatus.SUCCEEDED, "done")
    await writer.stop(timeout=1)


async def test_an_outcome_whose_lease_is_lost_is_not_written() -> None:
    store = MemoryStore()
    await store.insert_jobs(new_jobs(3))
    [stale, *_] = await store.claim_batch("default", 3, "w", 30)
    assert await store.release_job(stale.id)  # an operator took it back
    writer = OutcomeWriter(store)
    writer.start()
    writer.add(succeeded(stale))
    await writer.flush()
    await writer.stop(timeout=1)
    record = await store.get_job(stale.id)
    assert record is not None
    assert (record.status, record.result) == (JobStatus.PENDING, None)
