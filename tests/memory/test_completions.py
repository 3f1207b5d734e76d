"""A job's success written by the job itself, in memory (`memory/_completions.py`): at once,
never in a caller's transaction, which the in-memory store cannot join. The rest of its
behaviour is the contract suite's (contract/test_completions_contract.py)."""

from __future__ import annotations

import pytest

from starlette_jobs import JobStatus, MemoryStoreUnsupportedError
from starlette_jobs.memory._store import MemoryStore
from tests.records import new_jobs


async def test_a_connection_is_refused_and_nothing_changes() -> None:
    store = MemoryStore()
    [job_id] = await store.insert_jobs(new_jobs())
    (claim,) = await store.claim_batch("default", 1, "w", 30)
    with pytest.raises(MemoryStoreUnsupportedError, match=r"pass None to complete the job"):
        await store.complete_job(job_id, claim.lease_token, '"x"', object())
    record = await store.get_job(job_id)
    assert record is not None
    assert record.status is JobStatus.RUNNING
    # Without a connection it completes at once, under the same lease.
    await store.complete_job(job_id, claim.lease_token, '"x"')
    record = await store.get_job(job_id)
    assert record is not None
    assert (record.status, record.result) == (JobStatus.SUCCEEDED, "x")
